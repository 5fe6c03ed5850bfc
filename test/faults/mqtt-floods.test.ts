import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mqtt, { type MqttClient } from 'mqtt';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Simulator } from '../../agent/simulator/simulator.js';
import { AgentProcess } from '../helpers/agent-process.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { TEST_API_KEY, TEST_SECRET } from '../helpers/config.js';
import { freePort } from '../helpers/ports.js';
import { vendorRecord } from '../helpers/records.js';
import { Subscriber } from '../helpers/subscriber.js';
import { describeWith } from '../helpers/tools.js';
import { webhookStatus } from '../helpers/webhook.js';

/**
 * A site system that sends the agent requests in a loop: a Home Assistant automation that
 * triggers itself, a POS script without a pause. Over MQTT nothing slows it down but the broker,
 * and a QoS 0 publisher is not slowed at all. The built agent, run from the CLI as systemd runs
 * it, against a real Mosquitto.
 */

const SITE = 'flood-01';
const B = `chair-agent/${SITE}`;
/** The unit's MemoryMax is 300M; RssAnon is what the kernel cannot reclaim from the agent. */
const RSS_ANON_BOUND_KB = 200 * 1024;

let dir: string;
let broker: TestBroker;
let sim: Simulator;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'floods-'));
  chmodSync(dir, 0o755);
  broker = await startBroker();
  sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 2 });
  await sim.start();
});

afterAll(async () => {
  await sim.close();
  await broker.stop();
  rmSync(dir, { recursive: true, force: true });
});

function rssAnonKb(pid: number): number {
  const m = /RssAnon:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

/** Publishes `count` QoS 0 messages, round robin over `messages`, as fast as the socket takes them. */
async function flood(client: MqttClient, messages: [string, string][], count: number): Promise<void> {
  const stream = client.stream as unknown as { writableLength: number; once(e: 'drain', f: () => void): void };
  for (let sent = 0; sent < count; ) {
    for (let i = 0; i < 500 && sent < count; i++, sent++) {
      const [topic, payload] = messages[sent % messages.length] as [string, string];
      client.publish(topic, payload, { qos: 0 });
    }
    if (stream.writableLength > 1 << 20) await new Promise<void>((resolve) => stream.once('drain', resolve));
    else await new Promise<void>((resolve) => setImmediate(resolve));
  }
  await client.endAsync();
}

describeWith('mosquitto', 'a site system that sends requests in a loop', () => {
  it('keeps the agent within its memory and working: a few answers a second, the rest counted, webhooks stored and delivered', async () => {
    const port = await freePort();
    const path = join(dir, 'site.yaml');
    writeFileSync(
      path,
      `site: {id: ${SITE}}\nvendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}, pollSeconds: 0.5}\nwebhook: {channelSecret: ${TEST_SECRET}}\n` +
        `http: {host: 127.0.0.1, port: ${port}}\nmqtt: {url: "${broker.url}"}\nstorage: {path: ${join(dir, 'agent.db')}}\n` +
        `gpio: {driver: sim, chairs: [{deviceId: MC7001, button: 17, led: 27}]}\nhomeassistant: {enabled: true}\n`,
    );
    const agent = AgentProcess.start(['run', '--config', path]);
    const pid = agent.child.pid as number;
    const base = `http://127.0.0.1:${port}`;
    const sub = await Subscriber.connect(broker.url, [`${B}/bridge/response/+`, `${B}/chairs/MC7001/start/response`, `${B}/transactions/+`]);
    const asker = await mqtt.connectAsync(broker.url, { protocolVersion: 5 });
    let sampler: NodeJS.Timeout | undefined;
    try {
      await agent.waitForLog((l) => l.msg === 'connected to the broker', 'the agent on the broker');
      await agent.waitForLog((l) => l.msg === 'vendor API reachable', 'the chairs listed');
      const controlsBefore = sim.requests.control;

      let peak = rssAnonKb(pid);
      sampler = setInterval(() => (peak = Math.max(peak, rssAnonKb(pid))), 50);
      const flooder = await mqtt.connectAsync(broker.url, { protocolVersion: 5, clientId: 'automation-loop' });
      const flooding = flood(
        flooder,
        [
          [`${B}/bridge/request/info`, '{"transaction":"loop"}'],
          [`${B}/chairs/MC7001/start`, '{"minutes":1,"transaction":"loop"}'],
          ['homeassistant/status', 'online'],
        ],
        600_000,
      );
      // Meanwhile, a request of another name is answered, as the broker brings it,
      await asker.publishAsync(`${B}/bridge/request/health_check`, '{"transaction":"other"}', { qos: 1 });
      // the vendor's webhook is stored and its record delivered, and /healthz answers.
      const rec = vendorRecord({ DeviceId: 'MC7001' });
      expect(await webhookStatus(base, rec)).toBe(200);
      await sub.waitFor((m) => m.topic === `${B}/transactions/MC7001` && m.text.includes(String(rec['TransactionId'])), 'the record delivered during the flood', 0, 30_000);
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      const other = await sub.waitFor((m) => m.topic === `${B}/bridge/response/health_check` && JSON.parse(m.text).transaction === 'other', 'the other request answered', 0, 30_000);
      expect(JSON.parse(other.text)).toMatchObject({ status: 'ok' });
      await flooding;
      // Once it stops, the flooded request is answered again: asked once a second, as a client told
      // rate_limited would, until the broker has brought the agent the rest of the flood.
      const after = sub.mark();
      const ask = (): Promise<unknown> => asker.publishAsync(`${B}/bridge/request/info`, '{"transaction":"after"}', { qos: 1 });
      await ask();
      const asking = setInterval(() => void ask(), 1_000);
      const answer = await sub
        .waitFor((m) => m.topic === `${B}/bridge/response/info` && JSON.parse(m.text).transaction === 'after' && JSON.parse(m.text).status === 'ok', 'the answer after the flood', after, 60_000)
        .finally(() => clearInterval(asking));
      clearInterval(sampler);
      peak = Math.max(peak, rssAnonKb(pid));

      expect(JSON.parse(answer.text)).toMatchObject({ status: 'ok', transaction: 'after' });
      expect(peak, `peak RssAnon ${Math.round(peak / 1024)} MB`).toBeLessThan(RSS_ANON_BOUND_KB);
      // A few answers a second were sent, some saying why the rest were not carried out.
      const answers = sub.messages.slice(0, after).filter((m) => m.topic.startsWith(`${B}/bridge/response/`) || m.topic.endsWith('/start/response'));
      expect(answers.some((m) => JSON.parse(m.text).code === 'rate_limited')).toBe(true);
      expect(answers.some((m) => JSON.parse(m.text).error === 'rate_limited')).toBe(true);
      expect(answers.length).toBeLessThan(60_000);
      // The loop reached the vendor once at most: a chair started, and the rest refused here.
      expect(sim.requests.control - controlsBefore).toBeLessThanOrEqual(1);
      // The log says so in a line a minute, not a line each, and /metrics counts them.
      const dropped = agent.lines.filter((l) => l['status'] === 'dropped');
      expect(dropped.map((l) => l['what']).sort()).toEqual(['bridge_request', 'start']);
      expect(agent.lines.length).toBeLessThan(2_000);
      const metrics = await (await fetch(`${base}/metrics`)).text();
      expect(metrics).toMatch(/chair_agent_refused_requests_total\{what="bridge_request",status="dropped"\} [1-9]/);
      expect(metrics).toMatch(/chair_agent_refused_requests_total\{what="start",status="dropped"\} [1-9]/);
    } finally {
      clearInterval(sampler);
      await asker.endAsync();
      await sub.client.endAsync();
      expect(await agent.signal('SIGTERM')).toBe(0);
    }
  }, 120_000);
});
