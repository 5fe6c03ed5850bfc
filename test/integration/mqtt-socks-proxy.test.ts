import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { build, type Agent } from '../../agent/build.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { AgentProcess } from '../helpers/agent-process.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { runCli } from '../helpers/cli.js';
import { TEST_API_KEY, TEST_SECRET, testConfig } from '../helpers/config.js';
import { memoryLogger } from '../helpers/memory-logger.js';
import { freePort } from '../helpers/ports.js';
import { vendorRecord } from '../helpers/records.js';
import { startMicrosocks, type SiteProxy } from '../helpers/site-proxies.js';
import { Subscriber } from '../helpers/subscriber.js';
import { issueServerCertificate } from '../helpers/test-ca.js';
import { describeWith, has } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';
import { webhookStatus } from '../helpers/webhook.js';

// A site whose only way out is a SOCKS5 proxy: mqtt.proxy: socks5://user:password@host:port, as
// vendor.proxy takes it, against Debian's microsocks with a login. The password is one a site
// writes: a % that starts no escape.

const USER = 'site';
const PASSWORD = 'Spa50%off!';
let dir: string;
let sim: Simulator;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mqtt-socks-'));
  // Mosquitto, started as root, reads its certificate as its own user.
  chmodSync(dir, 0o755);
  sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 2 });
  await sim.start();
  if (!has('openssl')) return;
  issueServerCertificate(dir, { caName: 'central-ca', name: 'server', cn: 'localhost', altNames: 'DNS:localhost,IP:127.0.0.1' });
});
afterAll(async () => {
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
});

const withLogin = (proxy: SiteProxy, password = PASSWORD): string => proxy.url.replace('socks5://', `socks5://${USER}:${password}@`);
/**
 * The SOCKS connections microsocks made to the broker, from its log. The brokers are named by
 * address: microsocks connects to the first address a name resolves to, and Debian 13 resolves
 * localhost to ::1 first, where the test brokers do not listen (the agent sends names; seen by hand).
 */
const connections = (proxy: SiteProxy, port: number): number => proxy.log().split(`connected to 127.0.0.1:${port}`).length - 1;

/** Mosquitto with a plain listener (for the test's subscriber) and a TLS one, as a central broker has. */
async function centralBroker(): Promise<{ broker: TestBroker; port: number }> {
  const port = await freePort();
  const broker = await startBroker({ listener: (p) => `listener ${p} 127.0.0.1\nallow_anonymous true\nlistener ${port} 127.0.0.1\ncertfile ${join(dir, 'server.pem')}\nkeyfile ${join(dir, 'server.key')}` });
  return { broker, port };
}

const webhook = (agent: Agent, deviceId: string): Promise<number> => webhookStatus(`http://127.0.0.1:${agent.http.address().port}`, vendorRecord({ DeviceId: deviceId }));

describeWith(['mosquitto', 'microsocks', 'openssl'], "the broker through the site's SOCKS5 proxy (microsocks with a login)", () => {
  let proxy: SiteProxy;
  beforeAll(async () => {
    proxy = await startMicrosocks({ user: USER, password: PASSWORD });
  });
  afterAll(() => void proxy?.child.kill());

  it("mqtts:// through it: the broker's certificate is checked, a record is delivered, and a lost connection comes back through a new one", async () => {
    const { broker, port } = await centralBroker();
    const { logger, lines } = memoryLogger('info');
    const agent = build(testConfig({ vendorUrl: sim.url, brokerUrl: `mqtts://127.0.0.1:${port}` }, { site: { id: 'socks-tls' }, mqtt: { ca: join(dir, 'ca.pem'), proxy: withLogin(proxy) } }), { logger });
    const sub = await Subscriber.connect(broker.url, 'chair-agent/socks-tls/transactions/+');
    await agent.start();
    try {
      await waitFor(() => agent.broker.connected || undefined, () => `connected through the proxy: ${JSON.stringify(lines.slice(-3))}`);
      expect(connections(proxy, port)).toBe(1);
      expect(await webhook(agent, 'MC7001')).toBe(200);
      await waitFor(() => sub.messages.find((m) => m.text.includes('MC7001')), 'the transaction through the proxy');
      await broker.kill();
      await waitFor(() => !agent.broker.connected || undefined, 'the connection lost');
      expect(await webhook(agent, 'MC7002')).toBe(200);
      await broker.restart();
      await waitFor(() => agent.broker.connected || undefined, 'connected again');
      expect(connections(proxy, port)).toBeGreaterThan(1);
      await sub.close();
      const again = await Subscriber.connect(broker.url, 'chair-agent/socks-tls/transactions/+');
      try {
        await waitFor(() => agent.outbox.stats().pending === 0 || undefined, 'the record kept during the outage acknowledged');
      } finally {
        await again.close();
      }
      expect(JSON.stringify(lines)).not.toContain(PASSWORD);
    } finally {
      await sub.close();
      await agent.stop();
      await broker.stop();
    }
  });

  it('a login it refuses: said once as the proxy refusing it, the record kept on disk and delivered once the login is right', async () => {
    const { broker } = await centralBroker();
    const db = join(dir, 'refused.db');
    const { logger, lines } = memoryLogger('debug');
    const config = (proxyUrl: string) => testConfig({ vendorUrl: sim.url, brokerUrl: `mqtt://127.0.0.1:${broker.port}`, dbPath: db }, { site: { id: 'socks-refused' }, mqtt: { proxy: proxyUrl } });
    const agent = build(config(withLogin(proxy, 'wrong-password')), { logger });
    await agent.start();
    try {
      await waitFor(() => lines.find((l) => l.msg === 'broker connection error'), 'the refusal');
      expect(await webhook(agent, 'MC7002')).toBe(200);
      expect(agent.outbox.stats().pending).toBe(1);
      // Several attempts later, still said once.
      await waitFor(() => (lines.filter((l) => l.msg === 'broker offline, reconnecting').length >= 3 ? true : undefined), 'more attempts');
      const said = lines.filter((l) => l.msg === 'broker connection error');
      expect(said).toHaveLength(1);
      expect(String(said[0]?.['err'])).toBe(`the proxy ${proxy.url} did not connect to 127.0.0.1:${broker.port} (SOCKS5: it refused the user and password in mqtt.proxy)`);
      expect(connections(proxy, broker.port)).toBe(0);
    } finally {
      await agent.stop();
    }
    const right = build(config(withLogin(proxy)), { logger });
    const sub = await Subscriber.connect(broker.url, 'chair-agent/socks-refused/transactions/+');
    await right.start();
    try {
      await waitFor(() => sub.messages.find((m) => m.text.includes('MC7002')), 'the kept record delivered through the proxy');
      await waitFor(() => right.outbox.stats().pending === 0 || undefined, 'acknowledged');
    } finally {
      await sub.close();
      await right.stop();
      await broker.stop();
    }
  });

  it('the built agent from the CLI: check masks the password, doctor reaches the broker through the proxy and says what is wrong without the login, and run delivers', async () => {
    const { broker, port } = await centralBroker();
    const path = join(dir, 'cli.yaml');
    const write = (proxyUrl: string): void =>
      writeFileSync(
        path,
        `site: {id: socks-cli}\nvendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}}\nwebhook: {channelSecret: ${TEST_SECRET}}\nhttp: {host: 127.0.0.1, port: 0}\nmqtt: {url: "mqtts://127.0.0.1:${port}", ca: ${join(dir, 'ca.pem')}, proxy: "${proxyUrl}"}\nstorage: {path: ${join(dir, 'cli.db')}}\n`,
      );
    write(withLogin(proxy));
    const sub = await Subscriber.connect(broker.url, 'chair-agent/socks-cli/bridge/state');
    try {
      const check = await runCli(['check', '--config', path]);
      expect(check.stdout).toContain(`proxy: socks5://${USER}:********@127.0.0.1:${proxy.port}`);
      const doctor = await runCli(['doctor', '--config', path]);
      expect(doctor.stdout).toMatch(new RegExp(`^ok {4}broker {6}mqtts://127.0.0.1:${port} accepted the connection`, 'm'));
      const agent = AgentProcess.start(['run', '--config', path]);
      try {
        await agent.waitForLog((l) => l.msg === 'connected to the broker', 'connected through the proxy');
        await waitFor(() => sub.messages.find((m) => m.text.includes('online')), 'bridge/state online through the proxy');
        expect(await agent.signal('SIGTERM')).toBe(0);
      } finally {
        await agent.signal('SIGTERM');
      }
      write(proxy.url);
      const without = await runCli(['doctor', '--config', path]);
      expect(without.stdout).toContain(`FAIL  broker      mqtts://127.0.0.1:${port}: the proxy ${proxy.url} did not connect to 127.0.0.1:${port} (SOCKS5: it wants credentials, user:password@ in mqtt.proxy)`);
      expect(without.stdout).toContain(`curl -v -x socks5h://<host:port of the proxy> telnet://127.0.0.1:${port}`);
      expect(check.stdout + check.stderr + doctor.stdout + doctor.stderr).not.toContain(PASSWORD);
    } finally {
      await sub.close();
      await broker.stop();
    }
  });
});

describeWith(['mosquitto with websockets', 'microsocks', 'openssl'], "wss:// through the site's SOCKS5 proxy", () => {
  it('the WebSocket goes through the proxy, TLS inside it, and a record is delivered', async () => {
    const proxy = await startMicrosocks({ user: USER, password: PASSWORD });
    const port = await freePort();
    const broker = await startBroker({ listener: (p) => `listener ${p} 127.0.0.1\nallow_anonymous true\nlistener ${port} 127.0.0.1\ncertfile ${join(dir, 'server.pem')}\nkeyfile ${join(dir, 'server.key')}\nprotocol websockets` });
    const agent = build(testConfig({ vendorUrl: sim.url, brokerUrl: `wss://127.0.0.1:${port}/mqtt` }, { site: { id: 'socks-wss' }, mqtt: { ca: join(dir, 'ca.pem'), proxy: withLogin(proxy) } }), { logger: memoryLogger('info').logger });
    const sub = await Subscriber.connect(broker.url, 'chair-agent/socks-wss/transactions/+');
    await agent.start();
    try {
      await waitFor(() => agent.broker.connected || undefined, 'connected over wss through the proxy');
      expect(connections(proxy, port)).toBe(1);
      expect(await webhook(agent, 'MC7001')).toBe(200);
      await waitFor(() => sub.messages.find((m) => m.text.includes('MC7001')), 'the transaction over wss through the proxy');
    } finally {
      await sub.close();
      await agent.stop();
      await broker.stop();
      proxy.child.kill();
    }
  });
});

describeWith(['mosquitto', 'openssl'], "mqtt.js's MQTTJS_SOCKS_PROXY in the environment", () => {
  it('changes nothing: the built agent reaches the broker over mqtt:// and mqtts:// as its config says (mqtt.proxy is the one way to a proxy)', async () => {
    const { broker, port } = await centralBroker();
    const path = join(dir, 'env-socks.yaml');
    const write = (url: string): void =>
      writeFileSync(path, `site: {id: env-socks}\nvendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}}\nwebhook: {channelSecret: ${TEST_SECRET}}\nmqtt: {url: "${url}", ca: ${join(dir, 'ca.pem')}}\nstorage: {path: ${join(dir, 'env-socks.db')}}\n`);
    try {
      for (const url of [broker.url, `mqtts://localhost:${port}`]) {
        write(url);
        // A proxy that is not there: followed, every connection would fail.
        const doctor = await runCli(['doctor', '--config', path], { MQTTJS_SOCKS_PROXY: 'socks5://127.0.0.1:9' });
        expect(doctor.stdout).toMatch(new RegExp(`^ok {4}broker {6}${url} accepted the connection`, 'm'));
      }
    } finally {
      await broker.stop();
    }
  });
});
