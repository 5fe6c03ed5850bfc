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
import { startSquid, startTinyproxy, tlsFront, type SiteProxy } from '../helpers/site-proxies.js';
import { issueServerCertificate } from '../helpers/test-ca.js';
import { Subscriber } from '../helpers/subscriber.js';
import { describeWith, has } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';
import { webhookStatus } from '../helpers/webhook.js';

// A site whose network lets the box out only through its HTTP proxy, to a central broker:
// mqtt.proxy opens a CONNECT tunnel for every transport, through the proxies sites run,
// Debian's tinyproxy (with BasicAuth) and squid with Debian's own access rules.

const PROXY_USER = 'site';
const PROXY_PASSWORD = 'tunn3l-pass-8642';
let dir: string;
let sim: Simulator;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mqtt-proxy-'));
  // squid, started as root, runs as its own user and writes its logs here.
  chmodSync(dir, 0o777);
  sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 2 });
  await sim.start();
  if (!has('openssl')) return;
  // Both names: squid 6 takes localhost for ::1, where the test brokers do not listen.
  issueServerCertificate(dir, { caName: 'central-ca', name: 'server', cn: 'localhost', altNames: 'DNS:localhost,IP:127.0.0.1' });
});
afterAll(async () => {
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
});

type Proxy = SiteProxy;

const withAuth = (url: string): string => url.replace('http://', `http://${PROXY_USER}:${encodeURIComponent(PROXY_PASSWORD)}@`);

/** A signed webhook with one record, as the vendor sends it: its HTTP status. */
const webhook = (agent: Agent, deviceId: string): Promise<number> => webhookStatus(`http://127.0.0.1:${agent.http.address().port}`, vendorRecord({ DeviceId: deviceId }));

/** A webhook's record reaches a subscriber on the broker's own plain listener, and the outbox empties. */
async function delivers(agent: Agent, site: string, subUrl: string): Promise<void> {
  const sub = await Subscriber.connect(subUrl, `chair-agent/${site}/transactions/+`);
  try {
    expect(await webhook(agent, 'MC7001')).toBe(200);
    await waitFor(() => sub.messages.length > 0 || undefined, 'the transaction through the tunnel');
    await waitFor(() => agent.outbox.stats().pending === 0 || undefined, 'the record acknowledged');
  } finally {
    await sub.close();
  }
}

/** Mosquitto with a plain listener (for the test's subscriber) and one more, TLS or WebSocket. */
async function centralBroker(second: (port: number) => string): Promise<{ broker: TestBroker; port: number }> {
  const port = await freePort();
  const broker = await startBroker({ listener: (p) => `listener ${p} 127.0.0.1\nallow_anonymous true\n${second(port)}` });
  return { broker, port };
}
const tlsListener = (port: number): string => `listener ${port} 127.0.0.1\ncertfile ${join(dir, 'server.pem')}\nkeyfile ${join(dir, 'server.key')}`;

describeWith(['mosquitto', 'tinyproxy', 'openssl'], "the broker through the site's proxy (tinyproxy with BasicAuth)", () => {
  let proxy: Proxy;
  beforeAll(async () => {
    proxy = await startTinyproxy(dir, 'tiny', `BasicAuth ${PROXY_USER} ${PROXY_PASSWORD}\n`);
  });
  afterAll(() => void proxy?.child.kill());

  it('mqtts:// through a CONNECT tunnel: the broker certificate is checked by name, a record is delivered, and a lost connection comes back through a new tunnel', async () => {
    const { broker, port } = await centralBroker(tlsListener);
    const { logger, lines } = memoryLogger('info');
    const agent = build(testConfig({ vendorUrl: sim.url, brokerUrl: `mqtts://localhost:${port}` }, { site: { id: 'tunnel-tls' }, mqtt: { ca: join(dir, 'ca.pem'), proxy: withAuth(proxy.url) } }), { logger });
    await agent.start();
    try {
      await waitFor(() => agent.broker.connected || undefined, () => `connected through the proxy: ${JSON.stringify(lines.slice(-3))}`);
      expect(proxy.log()).toContain(`CONNECT localhost:${port}`);
      await delivers(agent, 'tunnel-tls', broker.url);
      const tunnels = proxy.log().split(`CONNECT localhost:${port}`).length - 1;
      await broker.kill();
      await waitFor(() => !agent.broker.connected || undefined, 'the connection lost');
      await broker.restart();
      await waitFor(() => agent.broker.connected || undefined, 'connected again');
      expect(proxy.log().split(`CONNECT localhost:${port}`).length - 1).toBeGreaterThan(tunnels);
      await delivers(agent, 'tunnel-tls', broker.url);
      expect(JSON.stringify(lines)).not.toContain(PROXY_PASSWORD);
    } finally {
      await agent.stop();
      await broker.stop();
    }
  });

  it('without the credentials the proxy wants: said once with what to set, the record kept on disk and delivered once they are right', async () => {
    const { broker } = await centralBroker(() => '');
    const db = join(dir, 'no-auth.db');
    const { logger, lines } = memoryLogger('info');
    const config = (proxyUrl: string) => testConfig({ vendorUrl: sim.url, brokerUrl: `mqtt://localhost:${broker.port}`, dbPath: db }, { site: { id: 'tunnel-auth' }, mqtt: { proxy: proxyUrl } });
    const agent = build(config(proxy.url), { logger });
    await agent.start();
    try {
      await waitFor(() => lines.find((l) => l.msg === 'broker connection error'), 'the refusal');
      expect(await webhook(agent, 'MC7002')).toBe(200);
      expect(agent.outbox.stats().pending).toBe(1);
      // Several attempts later, still said once.
      await waitFor(() => (proxy.log().split('CONNECT localhost').length > 4 ? true : undefined), 'more attempts');
      const said = lines.filter((l) => l.msg === 'broker connection error');
      expect(said).toHaveLength(1);
      expect(String(said[0]?.['err'])).toMatch(new RegExp(`the proxy ${proxy.url} refused the tunnel to localhost:${broker.port} \\(HTTP 40[17] [^)]*\\): it wants credentials, user:password@ in mqtt\\.proxy`));
    } finally {
      await agent.stop();
    }
    const again = build(config(withAuth(proxy.url)), { logger });
    const sub = await Subscriber.connect(broker.url, 'chair-agent/tunnel-auth/transactions/+');
    await again.start();
    try {
      await waitFor(() => sub.messages.find((m) => m.text.includes('MC7002')), 'the kept record delivered through the proxy');
      await waitFor(() => again.outbox.stats().pending === 0 || undefined, 'acknowledged');
    } finally {
      await sub.close();
      await again.stop();
      await broker.stop();
    }
  });

  it('check and doctor from the CLI: the proxy shown with its password masked, the broker reached through it, the password printed nowhere', async () => {
    const { broker, port } = await centralBroker(tlsListener);
    const path = join(dir, 'cli-auth.yaml');
    writeFileSync(
      path,
      `site: {id: tunnel-cli}\nvendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}}\nwebhook: {channelSecret: ${TEST_SECRET}}\nmqtt: {url: "mqtts://localhost:${port}", ca: ${join(dir, 'ca.pem')}, proxy: "${withAuth(proxy.url)}"}\nstorage: {path: ${join(dir, 'cli-auth.db')}}\n`,
    );
    try {
      const check = await runCli(['check', '--config', path]);
      expect(check.stdout).toContain(`proxy: http://${PROXY_USER}:********@127.0.0.1:${new URL(proxy.url).port}/`);
      const doctor = await runCli(['doctor', '--config', path]);
      expect(doctor.stdout).toMatch(new RegExp(`^ok {4}broker {6}mqtts://localhost:${port} accepted the connection`, 'm'));
      expect(check.stdout + check.stderr + doctor.stdout + doctor.stderr).not.toContain(PROXY_PASSWORD);
    } finally {
      await broker.stop();
    }
  });

  it('an https:// proxy (TLS to the proxy itself, its CA trusted through NODE_EXTRA_CA_CERTS): doctor reaches the broker through it', async () => {
    const { broker, port } = await centralBroker(tlsListener);
    // TLS in front of tinyproxy, as stunnel or a proxy's own https_port serves it.
    const front = await tlsFront(join(dir, 'server.pem'), join(dir, 'server.key'), proxy.port);
    const path = join(dir, 'https-proxy.yaml');
    const httpsProxy = withAuth(`http://localhost:${front.port}`).replace('http://', 'https://');
    writeFileSync(
      path,
      `site: {id: tunnel-https}\nvendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}}\nwebhook: {channelSecret: ${TEST_SECRET}}\nmqtt: {url: "mqtts://localhost:${port}", ca: ${join(dir, 'ca.pem')}, proxy: "${httpsProxy}"}\nstorage: {path: ${join(dir, 'https-proxy.db')}}\n`,
    );
    try {
      const doctor = await runCli(['doctor', '--config', path], { NODE_EXTRA_CA_CERTS: join(dir, 'ca.pem') });
      expect(doctor.stdout).toMatch(new RegExp(`^ok {4}broker {6}mqtts://localhost:${port} accepted the connection`, 'm'));
      expect(proxy.log()).toContain(`CONNECT localhost:${port}`);
    } finally {
      front.server.close();
      await broker.stop();
    }
  });
});

describeWith(['mosquitto with websockets', 'tinyproxy', 'openssl'], "wss:// through the site's proxy (tinyproxy)", () => {
  it('the WebSocket goes through the tunnel, TLS inside it, and a record is delivered', async () => {
    const proxy = await startTinyproxy(dir, 'tiny-ws');
    const { broker, port } = await centralBroker((p) => `${tlsListener(p)}\nprotocol websockets`);
    const { logger, lines } = memoryLogger('info');
    const agent = build(testConfig({ vendorUrl: sim.url, brokerUrl: `wss://localhost:${port}/mqtt` }, { site: { id: 'tunnel-wss' }, mqtt: { ca: join(dir, 'ca.pem'), proxy: proxy.url } }), { logger });
    await agent.start();
    try {
      await waitFor(() => agent.broker.connected || undefined, () => `connected over wss through the proxy: ${JSON.stringify(lines.slice(-3))}`);
      expect(proxy.log()).toContain(`CONNECT localhost:${port}`);
      await delivers(agent, 'tunnel-wss', broker.url);
    } finally {
      await agent.stop();
      await broker.stop();
      proxy.child.kill();
    }
  });
});

describeWith(['mosquitto', 'squid', 'openssl'], "the broker through squid with Debian's access rules", () => {
  it("doctor says squid refuses a tunnel to a port outside SSL_ports, and what to do; with the port added, the built agent from the CLI delivers through it", async () => {
    const { broker, port } = await centralBroker(tlsListener);
    const strict = await startSquid(dir, 'squid-strict');
    const path = join(dir, 'squid.yaml');
    const write = (proxyUrl: string): void =>
      writeFileSync(
        path,
        `site: {id: tunnel-squid}\nvendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}}\nwebhook: {channelSecret: ${TEST_SECRET}}\nhttp: {host: 127.0.0.1, port: 0}\nmqtt: {url: "mqtts://127.0.0.1:${port}", ca: ${join(dir, 'ca.pem')}, proxy: "${proxyUrl}"}\nstorage: {path: ${join(dir, 'squid.db')}}\n`,
      );
    write(strict.url);
    try {
      const doctor = await runCli(['doctor', '--config', path]);
      const line = doctor.stdout.split('\n').find((l) => /^(ok|FAIL)\s+broker/.test(l)) ?? doctor.stdout;
      expect(line).toMatch(new RegExp(`^FAIL {2}broker .*refused the tunnel to 127.0.0.1:${port} \\(HTTP 403 Forbidden\\): .*acl SSL_ports port <port>`));
      expect(doctor.stdout).toContain(`hint: check mqtt.proxy (${strict.url}) and that it opens a tunnel to 127.0.0.1:${port}: curl -v -p -x <the proxy> telnet://127.0.0.1:${port}`);
      expect(strict.log()).toMatch(new RegExp(`TCP_DENIED/403 .*CONNECT 127.0.0.1:${port}`));
    } finally {
      strict.child.kill();
    }
    const open = await startSquid(dir, 'squid-open', { sslPorts: [port] });
    write(open.url);
    const agent = AgentProcess.start(['run', '--config', path]);
    const sub = await Subscriber.connect(broker.url, 'chair-agent/tunnel-squid/bridge/state');
    try {
      await agent.waitForLog((l) => l.msg === 'connected to the broker', 'connected through squid');
      await waitFor(() => sub.messages.find((m) => m.text.includes('online')), 'bridge/state online through the tunnel');
      expect(await agent.signal('SIGTERM')).toBe(0);
      // squid logs a tunnel when it closes.
      await waitFor(() => (new RegExp(`TCP_TUNNEL/200 .*CONNECT 127.0.0.1:${port}`).test(open.log()) ? true : undefined), "squid's log of the tunnel");
    } finally {
      await sub.close();
      await agent.signal('SIGTERM');
      open.child.kill();
      await broker.stop();
    }
  });
});

it("doctor, on a box whose vendor goes through the environment's proxy, says a broker outside the site needs mqtt.proxy too", async () => {
  const path = join(dir, 'outside.yaml');
  writeFileSync(path, `site: {id: outside}\nvendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}}\nwebhook: {channelSecret: ${TEST_SECRET}}\nmqtt: {url: "mqtts://central.invalid:443"}\nstorage: {path: ${join(dir, 'outside.db')}}\n`);
  // The proxy need not answer: the vendor check may fail, the broker's hint is what is asked.
  const r = await runCli(['doctor', '--config', path], { HTTP_PROXY: 'http://127.0.0.1:9' });
  expect(r.stdout).toContain('hint: the vendor is reached through a proxy (vendor.proxy, or the environment\'s): a broker outside the site is reached only through one too, with mqtt.proxy');
  const direct = await runCli(['doctor', '--config', path]);
  expect(direct.stdout).not.toContain('with mqtt.proxy');
});
