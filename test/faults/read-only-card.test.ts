import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mqtt from 'mqtt';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Simulator } from '../../agent/simulator/simulator.js';
import { AgentProcess } from '../helpers/agent-process.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { runCli } from '../helpers/cli.js';
import { TEST_API_KEY, TEST_SECRET } from '../helpers/config.js';
import { LoopCard } from '../helpers/loop-card.js';
import { freePort } from '../helpers/ports.js';
import { vendorRecord } from '../helpers/records.js';
import { Subscriber } from '../helpers/subscriber.js';
import { describeWith } from '../helpers/tools.js';
import { webhookStatus } from '../helpers/webhook.js';

/**
 * The end of an SD card's life on a Pi: a write fails, and the kernel makes the file system
 * read-only (Debian mounts with errors=remount-ro; kernels from 6.15 say `emergency_ro` and keep
 * calling the mount rw, so access(2) still passes). A real ext4 on a loop device, the built agent
 * run from the CLI with a config file, a real Mosquitto and the vendor simulator.
 */

const SITE = 'card-01';
const B = `chair-agent/${SITE}`;
const READ_ONLY = /the file system at .+ went read-only: the kernel stopped writes to it after a disk error/;

let dir: string;
let card: LoopCard;
let broker: TestBroker;
let sim: Simulator;
let config: string;
let base: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'card-'));
  chmodSync(dir, 0o755);
  broker = await startBroker();
  sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 2 });
  await sim.start();
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  config = join(dir, 'site.yaml');
  writeFileSync(
    config,
    `site: {id: ${SITE}}\nvendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}, pollSeconds: 0.5}\nwebhook: {channelSecret: ${TEST_SECRET}}\n` +
      `http: {host: 127.0.0.1, port: ${port}}\nmqtt: {url: "${broker.url}"}\nstorage: {path: ${join(dir, 'card', 'agent.db')}}\n` +
      `gpio: {driver: sim, chairs: [{deviceId: MC7001, button: 17, led: 27}]}\n`,
  );
});

afterAll(async () => {
  card?.remove();
  await sim.close();
  await broker.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function started(): Promise<AgentProcess> {
  const agent = AgentProcess.start(['run', '--config', config]);
  await agent.waitForLog((l) => l.msg === 'connected to the broker', 'the agent on the broker');
  await agent.waitForLog((l) => l.msg === 'vendor API reachable', 'the chairs listed');
  return agent;
}

async function database(): Promise<{ status: number; ok: boolean; detail: string }> {
  const res = await fetch(`${base}/healthz`);
  const body = (await res.json()) as { checks: Record<string, { ok: boolean; detail: string }> };
  return { status: res.status, ...(body.checks['database'] as { ok: boolean; detail: string }) };
}

const txId = (m: { text: string }): string => (JSON.parse(m.text) as { TransactionId: string }).TransactionId;

describeWith(['mosquitto', 'a loop-mounted ext4 (root)'], 'an SD card that goes read-only', () => {
  it('keeps the agent serving and saying why, answers 503 for what it cannot store, and loses nothing once the card is replaced', async () => {
    card = LoopCard.create(dir);
    const sub = await Subscriber.connect(broker.url, `${B}/transactions/+`);
    const asker = await mqtt.connectAsync(broker.url, { protocolVersion: 5 });
    let agent = await started();
    try {
      const before = vendorRecord({ DeviceId: 'MC7001' });
      expect(await webhookStatus(base, before)).toBe(200);
      await sub.waitFor((m) => txId(m) === before['TransactionId'], 'the record stored before the card failed');

      card.fail();
      // The vendor's next webhook cannot be stored: 503, which the vendor retries.
      const during = vendorRecord({ DeviceId: 'MC7001' });
      const refused = await webhookStatus(base, during);
      expect(refused).toBe(503);
      const health = await database();
      expect(health).toMatchObject({ status: 503, ok: false, detail: expect.stringMatching(READ_ONLY) });
      const logged = await agent.waitForLog((l) => l.component === 'store' && /database not writable/.test(l.msg), 'the store saying so');
      expect(logged['fix']).toMatch(/an SD card that does this is failing.*replace the card/);
      expect(agent.lines.some((l) => l.component === 'webhook' && l['code'] === 'STORE_READONLY')).toBe(true);

      // Everything that needs no write goes on: a chair is started over MQTT, /healthz answers.
      const controls = sim.requests.control;
      const answered = sub.mark();
      await sub.client.subscribeAsync(`${B}/chairs/MC7001/start/response`);
      await asker.publishAsync(`${B}/chairs/MC7001/start`, '{"minutes":1,"transaction":"pos-1"}', { qos: 1 });
      const answer = await sub.waitFor((m) => m.topic.endsWith('/start/response'), 'the start answered', answered, 20_000);
      expect(JSON.parse(answer.text)).toMatchObject({ status: 'ok', transaction: 'pos-1' });
      expect(sim.requests.control).toBe(controls + 1);

      // doctor says what the mount table says (access(2) calls the file writable).
      const doctor = await runCli(['doctor', '--config', config]);
      expect(doctor.stdout).toMatch(/FAIL\s+database\s+.*went read-only/);
      expect(doctor.stdout).toContain('replace the card');
      expect(await agent.signal('SIGTERM')).toBe(0);

      // Restarted on the same card (systemd's Restart=, a reboot that kept it read-only): said at once.
      agent = await started();
      expect(await database()).toMatchObject({ ok: false, detail: expect.stringMatching(/went read-only.*while opening the database/) });
      expect(await agent.signal('SIGTERM')).toBe(0);

      // The card replaced (here: checked and mounted again): the vendor's retry is stored and delivered.
      card.replace();
      agent = await started();
      expect(await database()).toMatchObject({ ok: true });
      expect(await webhookStatus(base, during)).toBe(200);
      await sub.waitFor((m) => txId(m) === during['TransactionId'], 'the retried record delivered');
      const delivered = new Set(sub.messages.filter((m) => m.topic.includes('/transactions/')).map(txId));
      expect(delivered).toEqual(new Set([before['TransactionId'], during['TransactionId']]));
    } finally {
      await agent.signal('SIGTERM');
      await asker.endAsync();
      await sub.close();
    }
  }, 120_000);
});
