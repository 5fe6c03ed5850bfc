import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Simulator } from '../../agent/simulator/simulator.js';
import { AgentProcess } from '../helpers/agent-process.js';
import { startBroker } from '../helpers/broker.js';
import { runCli } from '../helpers/cli.js';
import { TEST_API_KEY, TEST_SECRET } from '../helpers/config.js';
import { freePort } from '../helpers/ports.js';
import { describeWith } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';

/**
 * A site broker that gives each login the client id of its user name (Mosquitto's
 * use_username_as_clientid, which hardening guides suggest): doctor, logging in as the agent,
 * takes the running agent's session, and its will says offline. doctor says so, and why. And a
 * broker that admits client ids by prefix (clientid_prefixes) admits doctor as it admits the agent.
 */

const USER = 'chairs';
const PASSWORD = 'broker-pass-1357';
let dir: string;
let sim: Simulator;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'takeover-'));
  chmodSync(dir, 0o755);
  sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 1 });
  await sim.start();
});
afterAll(async () => {
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
});

async function siteBroker(forcedIds: boolean) {
  const passwd = join(dir, `passwd-${String(forcedIds)}`);
  writeFileSync(passwd, '');
  spawnSync('mosquitto_passwd', ['-b', passwd, USER, PASSWORD]);
  chmodSync(passwd, 0o644);
  return startBroker({
    listener: (p) => `listener ${p} 127.0.0.1\nallow_anonymous false\npassword_file ${passwd}${forcedIds ? '\nuse_username_as_clientid true' : ''}`,
  });
}

async function config(name: string, brokerPort: number): Promise<string> {
  const path = join(dir, `${name}.yaml`);
  writeFileSync(
    path,
    `site: {id: ${name}}\nvendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}}\nwebhook: {channelSecret: ${TEST_SECRET}}\nhttp: {host: 127.0.0.1, port: ${await freePort()}}\nmqtt: {url: "mqtt://127.0.0.1:${brokerPort}", username: ${USER}, password: ${PASSWORD}}\nstorage: {path: ${join(dir, `${name}.db`)}}\n`,
  );
  return path;
}

describeWith('mosquitto', 'doctor on brokers that set or restrict client ids', () => {
  it('with use_username_as_clientid, doctor says its check took the agent off the broker, and the agent comes back by itself', async () => {
    const broker = await siteBroker(true);
    const path = await config('forced', broker.port);
    const agent = AgentProcess.start(['run', '--config', path]);
    try {
      await agent.waitForLog((l) => l.msg === 'connected to the broker', 'the agent on the broker');
      const r = await runCli(['doctor', '--config', path]);
      expect(r.stdout).toMatch(/^ok {4}broker /m);
      expect(r.stdout).toMatch(/^FAIL {2}clientid {4}the agent was on the broker, and this check's connection ended its session \(its will said offline\)/m);
      expect(r.stdout).toContain('hint: the agent reconnects by itself; turn use_username_as_clientid off for the user "chairs"');
      await waitFor(() => (agent.lines.filter((l) => l.msg === 'connected to the broker').length >= 2 ? true : undefined), 'the agent back on the broker');
    } finally {
      expect(await agent.signal('SIGTERM')).toBe(0);
      await broker.stop();
    }
  });

  it('on a broker that keeps the client ids it is given, doctor beside the running agent says nothing of the kind', async () => {
    const broker = await siteBroker(false);
    const path = await config('kept', broker.port);
    const agent = AgentProcess.start(['run', '--config', path]);
    try {
      await agent.waitForLog((l) => l.msg === 'connected to the broker', 'the agent on the broker');
      const r = await runCli(['doctor', '--config', path]);
      expect(r.stdout).toMatch(/^ok {4}broker /m);
      expect(r.stdout).not.toContain('clientid');
      expect(agent.lines.filter((l) => l.msg === 'broker connection lost; buffering')).toEqual([]);
    } finally {
      expect(await agent.signal('SIGTERM')).toBe(0);
      await broker.stop();
    }
  });

  it('on a broker that admits client ids by prefix (clientid_prefixes), doctor is admitted as the agent is', async () => {
    const broker = await startBroker({ listener: (p) => `listener ${p} 127.0.0.1\nallow_anonymous true\nclientid_prefixes chair-agent-prefixed` });
    const path = join(dir, 'prefixed.yaml');
    writeFileSync(path, `site: {id: prefixed}\nvendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}}\nwebhook: {channelSecret: ${TEST_SECRET}}\nmqtt: {url: "${broker.url}"}\nstorage: {path: ${join(dir, 'prefixed.db')}}\n`);
    try {
      const r = await runCli(['doctor', '--config', path]);
      expect(r.stdout).toMatch(/^ok {4}broker /m);
    } finally {
      await broker.stop();
    }
  });
});
