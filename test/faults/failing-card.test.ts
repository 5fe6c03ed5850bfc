import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mqtt, { type MqttClient } from 'mqtt';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
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
 * The end of an SD card's life on a Pi: a write fails, and the kernel stops the file system
 * (Debian mounts with errors=remount-ro). How it stops it depends on the kernel: Linux 6.15 and
 * later make it read-only and say `emergency_ro` (the mount still says rw, so access(2) passes);
 * 6.5 to 6.14, Raspberry Pi OS's 6.6 and 6.12, shut it down, so every access fails with EIO, reads
 * too, and the mount table says nothing. A real ext4 on a loop device, the built agent run from
 * the CLI with a config file, a real Mosquitto and the vendor simulator.
 */

const SITE = 'card-01';
const B = `chair-agent/${SITE}`;

let dir: string;
let broker: TestBroker;
let sim: Simulator;
let card: LoopCard | null = null;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'card-'));
  chmodSync(dir, 0o755);
  broker = await startBroker();
  sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 2 });
  await sim.start();
});

afterEach(() => {
  card?.remove();
  card = null;
});

afterAll(async () => {
  await sim.close();
  await broker.stop();
  rmSync(dir, { recursive: true, force: true });
});

interface Site {
  config: string;
  base: string;
  sub: Subscriber;
  pos: MqttClient;
  start(): Promise<AgentProcess>;
  database(): Promise<{ status: number; ok: boolean; detail: string }>;
  /** A start over MQTT, answered: the POS's path, which needs no write. */
  startChair(transaction: string): Promise<unknown>;
  delivered(): Set<string>;
  close(): Promise<void>;
}

/** A site whose database is on a fresh card, and the clients that watch it. */
async function siteOnCard(name: string): Promise<Site> {
  const here = join(dir, name);
  mkdirSync(here);
  card = LoopCard.create(here);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const config = join(here, 'site.yaml');
  writeFileSync(
    config,
    `site: {id: ${SITE}}\nvendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}, pollSeconds: 0.5}\nwebhook: {channelSecret: ${TEST_SECRET}}\n` +
      `http: {host: 127.0.0.1, port: ${port}}\nmqtt: {url: "${broker.url}"}\nstorage: {path: ${join(card.mountPoint, 'agent.db')}}\n` +
      `gpio: {driver: sim, chairs: [{deviceId: MC7001, button: 17, led: 27}]}\n`,
  );
  // The chair idle (an earlier test's session ended) before an agent sees it.
  await fetch(`${sim.url}/sim/chairs/MC7001`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"stop":true}' });
  const sub = await Subscriber.connect(broker.url, [`${B}/transactions/+`, `${B}/chairs/MC7001/start/response`]);
  const pos = await mqtt.connectAsync(broker.url, { protocolVersion: 5 });
  const txId = (text: string): string => (JSON.parse(text) as { TransactionId: string }).TransactionId;
  return {
    config,
    base,
    sub,
    pos,
    async start() {
      const agent = AgentProcess.start(['run', '--config', config]);
      await agent.waitForLog((l) => l.msg === 'connected to the broker', 'the agent on the broker');
      await agent.waitForLog((l) => l.msg === 'vendor API reachable', 'the chairs listed');
      return agent;
    },
    async database() {
      const res = await fetch(`${base}/healthz`);
      const body = (await res.json()) as { checks: Record<string, { ok: boolean; detail: string }> };
      return { status: res.status, ...(body.checks['database'] as { ok: boolean; detail: string }) };
    },
    async startChair(transaction) {
      const since = sub.mark();
      await pos.publishAsync(`${B}/chairs/MC7001/start`, JSON.stringify({ minutes: 1, transaction }), { qos: 1 });
      const answer = await sub.waitFor((m) => m.topic.endsWith('/start/response') && m.text.includes(transaction), 'the start answered', since, 20_000);
      return JSON.parse(answer.text);
    },
    delivered: () => new Set(sub.messages.filter((m) => m.topic.includes('/transactions/')).map((m) => txId(m.text))),
    async close() {
      await pos.endAsync();
      await sub.close();
    },
  };
}

const waitDelivered = (site: Site, record: Record<string, unknown>, what: string): Promise<unknown> =>
  site.sub.waitFor((m) => m.topic.includes('/transactions/') && m.text.includes(String(record['TransactionId'])), what);

/** A record stored and delivered, then the card fails, and the vendor's next webhook gets 503. */
async function recordThenFailure(site: Site, fail: () => void): Promise<{ before: Record<string, unknown>; during: Record<string, unknown> }> {
  const before = vendorRecord({ DeviceId: 'MC7001' });
  expect(await webhookStatus(site.base, before)).toBe(200);
  await waitDelivered(site, before, 'the record stored before the card failed');
  fail();
  // The vendor's next webhook cannot be stored: 503, which the vendor retries.
  const during = vendorRecord({ DeviceId: 'MC7001' });
  expect(await webhookStatus(site.base, during)).toBe(503);
  return { before, during };
}

/**
 * The card replaced (here: checked and mounted again) and the agent started on it, as at the next
 * boot. Returns the new agent at once, so that the test stops it whatever is found next.
 */
async function replaceTheCard(site: Site, agent: AgentProcess): Promise<AgentProcess> {
  expect(await agent.signal('SIGTERM')).toBe(0);
  card?.replace();
  return site.start();
}

/** On the replaced card: the vendor's retry is stored and delivered, and nothing was lost. */
async function nothingLost(site: Site, before: Record<string, unknown>, during: Record<string, unknown>): Promise<void> {
  expect(await site.database()).toMatchObject({ ok: true });
  expect(await webhookStatus(site.base, during)).toBe(200);
  await waitDelivered(site, during, 'the retried record delivered');
  expect(site.delivered()).toEqual(new Set([before['TransactionId'], during['TransactionId']]));
}

describeWith(['mosquitto', 'a loop-mounted ext4 (root)'], 'an SD card that fails', () => {
  it('read-only (Linux 6.15 and later): keeps serving and says why, answers 503 for what it cannot store, loses nothing once the card is replaced', async () => {
    const site = await siteOnCard('stopped');
    let agent = await site.start();
    try {
      const { before, during } = await recordThenFailure(site, () => card?.fail());
      expect(await site.database()).toMatchObject({ status: 503, ok: false, detail: expect.stringMatching(/the file system at .+ went read-only: the kernel stopped writes to it after a disk error/) });
      const logged = await agent.waitForLog((l) => l.component === 'store' && /database not writable/.test(l.msg), 'the store saying so');
      expect(logged['fix']).toMatch(/an SD card that does this is failing.*replace the card/);
      expect(agent.lines.some((l) => l.component === 'webhook' && l['code'] === 'STORE_READONLY')).toBe(true);
      // What needs no write goes on: a chair is started over MQTT.
      expect(await site.startChair('pos-1')).toMatchObject({ status: 'ok', transaction: 'pos-1' });
      // doctor says what the mount table says (access(2) calls the file writable).
      const doctor = await runCli(['doctor', '--config', site.config]);
      expect(doctor.stdout).toMatch(/FAIL\s+database\s+.*went read-only/);
      expect(doctor.stdout).toContain('replace the card');
      expect(await agent.signal('SIGTERM')).toBe(0);

      // Restarted on the same card (systemd's Restart=, a reboot that kept it read-only): said at once.
      agent = await site.start();
      expect(await site.database()).toMatchObject({ ok: false, detail: expect.stringMatching(/went read-only.*while opening the database/) });
      agent = await replaceTheCard(site, agent);
      await nothingLost(site, before, during);
    } finally {
      await agent.signal('SIGTERM');
      await site.close();
    }
  }, 120_000);

  it('shut down (Linux 6.5 to 6.14, a Pi\'s kernels): every access fails, the site is not told the file is damaged, and the agent starts without it', async () => {
    const site = await siteOnCard('shut-down');
    let agent = await site.start();
    try {
      const { before, during } = await recordThenFailure(site, () => card?.shutDown());
      // A scrape reads the backlog's figures: a read of a file system that reads nothing.
      expect((await fetch(`${site.base}/metrics`)).status).toBe(200);
      const failed = /the file system at .+ fails every access \(EIO\): the kernel shut it down after a disk error, or its disk is gone/;
      expect(await site.database()).toMatchObject({ status: 503, ok: false, detail: expect.stringMatching(failed) });
      // SQLite calls the unreadable file "malformed": the site is not sent to repair a whole file.
      expect(agent.lines.filter((l) => /damaged|malformed/.test(JSON.stringify(l)))).toEqual([]);
      expect(await agent.signal('SIGTERM')).toBe(0);

      // Restarted on it, the agent does not fail to start (systemd would stop restarting it, and
      // the buttons, LEDs and chair states would go with it): it runs without the database.
      agent = await site.start();
      expect(await site.database()).toMatchObject({ status: 503, ok: false, detail: expect.stringMatching(/cannot open the database .+ fails every access \(EIO\)/) });
      expect(await webhookStatus(site.base, during)).toBe(503);
      expect(await site.startChair('pos-2')).toMatchObject({ status: 'ok', transaction: 'pos-2' });
      const doctor = await runCli(['doctor', '--config', site.config]);
      expect(doctor.stdout).toMatch(/FAIL\s+database\s+.*fails every access \(EIO\)/);
      // (A running agent opens it at its next look, every 30 s, without a restart: unit/store-component.)
      agent = await replaceTheCard(site, agent);
      await nothingLost(site, before, during);
    } finally {
      await agent.signal('SIGTERM');
      await site.close();
    }
  }, 120_000);
});
