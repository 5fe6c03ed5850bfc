import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build } from '../../agent/build.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { mosquittoPath } from '../helpers/broker.js';
import { TEST_API_KEY, testConfig } from '../helpers/config.js';
import { memoryLogger } from '../helpers/memory-logger.js';
import { freePort, waitForPort } from '../helpers/ports.js';
import { waitFor } from '../helpers/wait.js';

const mosquitto = mosquittoPath();
const ready = mosquitto !== null && spawnSync('openssl', ['version']).status === 0 && spawnSync('mosquitto_passwd', ['-h']).error === undefined;

const run = (cmd: string, args: string[], cwd: string): void => {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr}`);
};

describe.skipIf(!ready)('MQTT over TLS with a username and password', () => {
  let dir: string;
  let broker: ChildProcess;
  let port: number;
  let sim: Simulator;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tls-'));
    // A private CA and a server certificate for 127.0.0.1.
    run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=test-ca', '-keyout', 'ca.key', '-out', 'ca.pem'], dir);
    run('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', 'server.key', '-out', 'server.csr'], dir);
    writeFileSync(join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
    run('openssl', ['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', 'san.ext', '-out', 'server.pem'], dir);
    writeFileSync(join(dir, 'passwd'), '');
    run('mosquitto_passwd', ['-b', join(dir, 'passwd'), 'site-agent', 'broker-pass-8642'], dir);
    port = await freePort();
    writeFileSync(
      join(dir, 'mosquitto.conf'),
      `listener ${port} 127.0.0.1\nallow_anonymous false\npassword_file ${join(dir, 'passwd')}\ncafile ${join(dir, 'ca.pem')}\ncertfile ${join(dir, 'server.pem')}\nkeyfile ${join(dir, 'server.key')}\npersistence false\n`,
    );
    spawnSync('chmod', ['-R', 'a+rX', dir]);
    broker = spawn(mosquitto as string, ['-c', join(dir, 'mosquitto.conf')], { stdio: 'ignore' });
    await waitForPort(port);
    sim = new Simulator({ apiKey: TEST_API_KEY });
    await sim.start();
  });

  afterAll(async () => {
    await sim.close();
    broker.kill();
  });

  const agentWith = (mqtt: Record<string, unknown>) => {
    const log = memoryLogger('info', ['broker-pass-8642']);
    const agent = build(testConfig({ vendorUrl: sim.url, brokerUrl: `mqtts://127.0.0.1:${port}` }, { site: { id: 'tls' }, mqtt }), { logger: log.logger });
    return { agent, log };
  };

  it('connects with mqtts://, the site CA, a username and a password', async () => {
    const { agent, log } = agentWith({ ca: join(dir, 'ca.pem'), username: 'site-agent', password: 'broker-pass-8642' });
    await agent.start();
    await waitFor(() => agent.broker.connected, 'a TLS connection');
    await agent.stop();
    expect(log.raw.join('')).not.toContain('broker-pass-8642');
  });

  it('says why when the password is wrong, keeps running, and never logs the password', async () => {
    const { agent, log } = agentWith({ ca: join(dir, 'ca.pem'), username: 'site-agent', password: 'not-the-pass-1357' });
    await agent.start();
    const line = await waitFor(() => log.lines.find((l) => l.msg === 'broker connection error'), 'the refusal in the log');
    expect(String(line['err'])).toMatch(/Not authorized|Bad username or password/);
    expect(agent.health.get('broker').ok).toBe(false);
    await agent.stop();
    expect(log.raw.join('')).not.toContain('not-the-pass-1357');
  });

  it('refuses a broker certificate from an unknown CA', async () => {
    const { agent, log } = agentWith({ username: 'site-agent', password: 'broker-pass-8642' });
    await agent.start();
    const line = await waitFor(() => log.lines.find((l) => l.msg === 'broker connection error'), 'the TLS refusal');
    expect(String(line['err'])).toMatch(/self[- ]signed|unable to verify|certificate/i);
    expect(agent.broker.connected).toBe(false);
    await agent.stop();
  });
});
