import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Simulator } from '../../agent/simulator/simulator.js';
import { AgentProcess } from '../helpers/agent-process.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { runCli } from '../helpers/cli.js';
import { TEST_API_KEY, TEST_SECRET } from '../helpers/config.js';
import { freePort } from '../helpers/ports.js';
import { startSquid, type SiteProxy } from '../helpers/site-proxies.js';
import { Subscriber } from '../helpers/subscriber.js';
import { describeWith } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Passwords as a site's IT hands them out, with a % that starts no escape: "50%off". curl takes
 * `-x http://site:50%off@proxy` as that password, and squid's basic auth lets it through; the
 * agent takes it the same way in mqtt.url, mqtt.proxy and vendor.proxy. Before, every
 * connection failed "URI malformed" (and at 0.3.11 check refused the config, so an upgrade
 * stopped an agent that was still storing and starting chairs).
 */

const PASSWORD = 'Spa50%off!';
let dir: string;
let sim: Simulator;
let broker: TestBroker;
let squid: SiteProxy;
let brokerPort: number;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'pct-pass-'));
  // squid, started as root, runs as its own user: it reads the password file and writes its logs here.
  chmodSync(dir, 0o777);
  sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 1 });
  await sim.start();
});
afterAll(async () => {
  squid?.child.kill();
  await broker?.stop();
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
});

describeWith(['mosquitto', 'squid', 'openssl'], 'a password with a bare % in a URL', () => {
  beforeAll(async () => {
    // The site's broker: a login from Mosquitto's own password file.
    const passwd = join(dir, 'mosquitto.passwd');
    writeFileSync(passwd, '');
    spawnSync('mosquitto_passwd', ['-b', passwd, 'agent', PASSWORD]);
    chmodSync(passwd, 0o644);
    brokerPort = await freePort();
    broker = await startBroker({ listener: (p) => `per_listener_settings true\nlistener ${p} 127.0.0.1\nallow_anonymous true\nlistener ${brokerPort} 127.0.0.1\nallow_anonymous false\npassword_file ${passwd}` });
    // The site's proxy: squid with basic auth from an htpasswd file, the broker's port allowed.
    const htpasswd = join(dir, 'squid.htpasswd');
    const hash = spawnSync('openssl', ['passwd', '-apr1', PASSWORD], { encoding: 'utf8' }).stdout.trim();
    writeFileSync(htpasswd, `site:${hash}\n`);
    chmodSync(htpasswd, 0o644);
    squid = await startSquid(dir, 'squid-auth', {
      sslPorts: [brokerPort],
      access: [`auth_param basic program /usr/lib/squid/basic_ncsa_auth ${htpasswd}`, 'acl site_login proxy_auth REQUIRED', 'http_access deny !site_login'],
    });
  });

  it('in mqtt.url, mqtt.proxy and vendor.proxy: check passes, the built agent polls the vendor through squid and publishes through its tunnel to the broker, and the password is printed nowhere', async () => {
    const proxy = squid.url.replace('http://', `http://site:${PASSWORD}@`);
    const path = join(dir, 'site.yaml');
    writeFileSync(
      path,
      [
        'site: {id: pct}',
        `vendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}, proxy: "${proxy}"}`,
        `webhook: {channelSecret: ${TEST_SECRET}}`,
        'http: {host: 127.0.0.1, port: 0}',
        `mqtt: {url: "mqtt://agent:${PASSWORD}@127.0.0.1:${brokerPort}", proxy: "${proxy}"}`,
        `storage: {path: ${join(dir, 'site.db')}}`,
        '',
      ].join('\n'),
    );
    const check = await runCli(['check', '--config', path]);
    expect(check.code, check.stderr).toBe(0);
    const sub = await Subscriber.connect(broker.url, 'chair-agent/pct/chairs/+');
    const agent = AgentProcess.start(['run', '--config', path]);
    try {
      // The broker's login (mqtt.url) inside squid's tunnel (mqtt.proxy).
      await agent.waitForLog((l) => l.msg === 'connected to the broker', 'connected through squid with the password');
      // A chair's state: the vendor polled through squid (vendor.proxy, absolute form).
      await waitFor(() => sub.messages.find((m) => m.topic === 'chair-agent/pct/chairs/MC7001'), "the chair's state, polled through the proxy");
      expect(squid.log()).toMatch(/ site /);
      expect(squid.log()).not.toMatch(/TCP_DENIED\/407/);
      expect(await agent.signal('SIGTERM')).toBe(0);
      await waitFor(() => (new RegExp(`TCP_TUNNEL/200 .*CONNECT 127.0.0.1:${brokerPort} site `).test(squid.log()) ? true : undefined), "squid's log of the tunnel, as site");
      expect(check.stdout + agent.raw + agent.stderr).not.toContain('50%off');
    } finally {
      await sub.close();
      await agent.signal('SIGTERM');
    }
  });
});
