import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { build, type Agent } from '../../agent/build.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { AgentProcess } from '../helpers/agent-process.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { TEST_API_KEY, TEST_SECRET, testConfig } from '../helpers/config.js';
import { memoryLogger } from '../helpers/memory-logger.js';
import { vendorRecord } from '../helpers/records.js';
import { Subscriber } from '../helpers/subscriber.js';
import { issueServerCertificate } from '../helpers/test-ca.js';
import { describeWith } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';
import { webhookStatus } from '../helpers/webhook.js';

// A broker reached over MQTT's WebSocket transport: a central broker behind a site's firewall that
// lets only the web's ports out, or Mosquitto's websockets listener (2.1, or 2.0 built with
// libwebsockets: Debian 12's is not).

let dir: string;
let sim: Simulator;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ws-'));
  chmodSync(dir, 0o755);
  sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 2 });
  await sim.start();
});
afterAll(async () => {
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A signed webhook with one record, as the vendor sends it: its HTTP status. */
const webhook = (agent: Agent, deviceId: string): Promise<number> => webhookStatus(`http://127.0.0.1:${agent.http.address().port}`, vendorRecord({ DeviceId: deviceId }));

/** An agent on `url` delivers a webhook's record: a subscriber on `subUrl` gets it, the outbox empties. */
async function delivers(agent: Agent, site: string, subUrl: string, subOptions: Record<string, unknown> = {}): Promise<void> {
  const sub = await Subscriber.connect(subUrl, `chair-agent/${site}/transactions/+`, subOptions);
  try {
    expect(await webhook(agent, 'MC7001')).toBe(200);
    await waitFor(() => sub.messages.length > 0 || undefined, 'the transaction over the WebSocket');
    await waitFor(() => agent.outbox.stats().pending === 0 || undefined, 'the record acknowledged');
  } finally {
    await sub.close();
  }
}

describeWith('mosquitto with websockets', 'a broker over WebSocket (mqtt.url ws:// and wss://)', () => {
  it('ws:// with a path: connects, and a webhook record is delivered', async () => {
    const broker = await startBroker({ listener: (port) => `listener ${port} 127.0.0.1\nprotocol websockets\nallow_anonymous true` });
    const url = `ws://127.0.0.1:${broker.port}/mqtt`;
    const { logger, lines } = memoryLogger('info');
    const agent = build(testConfig({ vendorUrl: sim.url, brokerUrl: url }, { site: { id: 'ws-site' } }), { logger });
    await agent.start();
    try {
      await delivers(agent, 'ws-site', url);
      expect(lines.filter((l) => l.msg === 'connected to the broker')).toHaveLength(1);
    } finally {
      await agent.stop();
      await broker.stop();
    }
  });

  it('the built agent, started from the CLI, connects over ws:// (its bundle loads the WebSocket transport only then)', async () => {
    const broker = await startBroker({ listener: (port) => `listener ${port} 127.0.0.1\nprotocol websockets\nallow_anonymous true` });
    const path = join(dir, 'cli.yaml');
    writeFileSync(
      path,
      `site: {id: ws-cli}\nvendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}}\nwebhook: {channelSecret: ${TEST_SECRET}}\nhttp: {host: 127.0.0.1, port: 0}\nmqtt: {url: "ws://127.0.0.1:${broker.port}/mqtt"}\nstorage: {path: ${join(dir, 'cli.db')}}\n`,
    );
    const agent = AgentProcess.start(['run', '--config', path]);
    try {
      await agent.waitForLog((l) => l.msg === 'connected to the broker', 'connected over ws://');
    } finally {
      await agent.signal('SIGTERM');
      await broker.stop();
    }
  });
});

const openssl = spawnSync('openssl', ['version']).status === 0;
describeWith(['mosquitto with websockets', 'openssl'], 'a broker over secure WebSocket (wss://) with a private CA', () => {
  let broker: TestBroker;
  beforeAll(async () => {
    if (!openssl) return;
    issueServerCertificate(dir, { caName: 'ws-ca', name: 'server', cn: '127.0.0.1', altNames: 'IP:127.0.0.1' });
    // A CA that signed nothing the broker presents.
    spawnSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2', '-subj', '/CN=other-ca', '-keyout', 'other.key', '-out', 'other.pem'], { cwd: dir });
    chmodSync(join(dir, 'other.pem'), 0o644);
    broker = await startBroker({
      listener: (port) => `listener ${port} 127.0.0.1\nprotocol websockets\nallow_anonymous true\ncertfile ${join(dir, 'server.pem')}\nkeyfile ${join(dir, 'server.key')}`,
    });
  });
  afterAll(async () => broker?.stop());

  it('wss:// with mqtt.ca: connects over TLS, and a webhook record is delivered', async () => {
    const url = `wss://127.0.0.1:${broker.port}/mqtt`;
    const { logger, lines } = memoryLogger('info');
    const agent = build(testConfig({ vendorUrl: sim.url, brokerUrl: url }, { site: { id: 'wss-site' }, mqtt: { ca: join(dir, 'ca.pem') } }), { logger });
    await agent.start();
    try {
      await waitFor(() => agent.broker.connected || undefined, () => `connected over wss: ${JSON.stringify(lines.slice(-3))}`);
      await delivers(agent, 'wss-site', url, { ca: readFileSync(join(dir, 'ca.pem')) });
    } finally {
      await agent.stop();
    }
  });

  it('wss:// with a CA that did not sign the broker: refused by TLS, said once, the record kept', async () => {
    const { logger, lines } = memoryLogger('info');
    const agent = build(testConfig({ vendorUrl: sim.url, brokerUrl: `wss://127.0.0.1:${broker.port}/mqtt` }, { site: { id: 'wss-bad' }, mqtt: { ca: join(dir, 'other.pem') } }), { logger });
    await agent.start();
    try {
      await waitFor(() => lines.some((l) => l.msg === 'broker connection error') || undefined, 'the TLS refusal');
      expect(await webhook(agent, 'MC7001')).toBe(200);
      expect(String(lines.find((l) => l.msg === 'broker connection error')?.['err'])).toMatch(/certificate/i);
      expect(agent.broker.connected).toBe(false);
      expect(agent.outbox.stats().pending).toBe(1);
    } finally {
      await agent.stop();
    }
  });
});
