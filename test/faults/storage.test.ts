import { monitorEventLoopDelay } from 'node:perf_hooks';
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, type Agent } from '../../agent/build.js';
import { signBody } from '../../agent/http/sign.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { Outbox } from '../../agent/store/outbox.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { ROOT, runCli } from '../helpers/cli.js';
import { TEST_API_KEY, TEST_SECRET, testConfig } from '../helpers/config.js';
import { memoryLogger, type LogRecord } from '../helpers/memory-logger.js';
import { asRecord, vendorRecord, storeAll } from '../helpers/records.js';
import { Subscriber } from '../helpers/subscriber.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { waitFor } from '../helpers/wait.js';
import { itWith } from '../helpers/tools.js';
import { postWebhook } from '../helpers/webhook.js';

let sim: Simulator;
let broker: TestBroker;
beforeAll(async () => {
  sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 2 });
  await sim.start();
  broker = await startBroker();
});
afterAll(async () => {
  await sim.close();
  await broker.stop();
});

async function agentOn(db: string, brokerUrl: string): Promise<{ agent: Agent; lines: LogRecord[]; base: string }> {
  const { logger, lines } = memoryLogger('info');
  const agent = build(testConfig({ vendorUrl: sim.url, brokerUrl, dbPath: db }, { site: { id: 'store' }, transactions: { syncSchedule: '0 0 0 1 1 *' } }), { logger });
  await agent.start();
  return { agent, lines, base: `http://127.0.0.1:${agent.http.address().port}` };
}

async function webhook(base: string, record: unknown): Promise<{ status: number; body: string }> {
  const { status, text } = await postWebhook(base, record);
  return { status, body: text };
}

const removeDb = (db: string): void => {
  for (const x of ['', '-wal', '-shm']) rmSync(`${db}${x}`, { force: true });
};

describe('the database file under the running agent', () => {
  itWith('mosquitto', 'deleted while running: recreated before the next 200, with every waiting record moved in; nothing lost at the restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'deleted-'));
    const db = join(dir, 'agent.db');
    const proxy = new TcpProxy(broker.port);
    await proxy.start();
    proxy.up = false; // the broker is away: records stay waiting
    const a = await agentOn(db, proxy.url);
    const sub = await Subscriber.connect(broker.url, 'chair-agent/store/transactions/+');
    try {
      const before = Array.from({ length: 5 }, () => vendorRecord());
      for (const r of before) expect((await webhook(a.base, r)).status).toBe(200);
      removeDb(db);
      const after = vendorRecord();
      expect((await webhook(a.base, after)).status).toBe(200);
      expect(existsSync(db)).toBe(true);
      const check = new Outbox({ path: db, readonly: true });
      check.open();
      expect(check.stats().pending).toBe(6);
      check.close();
      expect(a.lines.find((l) => l.msg.startsWith('the database file was deleted or replaced while running'))?.['moved']).toBe(5);
      expect(a.agent.health.get('database').ok).toBe(true);

      // Deleted while idle: the periodic look (every 30 s) recreates it; here it is called directly.
      removeDb(db);
      a.agent.outbox.database.ensureFile('checking the database file');
      expect(existsSync(db)).toBe(true);

      await a.agent.stop();
      proxy.up = true;
      const again = await agentOn(db, proxy.url);
      const ids = [...before, after].map((r) => r['TransactionId']);
      await waitFor(() => ids.every((id) => sub.messages.some((m) => (JSON.parse(m.text) as Record<string, unknown>)['TransactionId'] === id)), 'all six delivered after the restart');
      await again.agent.stop();
    } finally {
      await sub.close();
      await proxy.stop();
    }
  });

  it('damaged: the agent starts, says so in /healthz and doctor, answers 503, and never crashes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'damaged-'));
    const db = join(dir, 'agent.db');
    const o = new Outbox({ path: db });
    o.open();
    for (let i = 0; i < 50; i++) await storeAll(o, Array.from({ length: 40 }, () => asRecord(vendorRecord({ Label: 'x'.repeat(200) }))), 'poll', i);
    o.close();
    const size = statSync(db).size;
    const fd = openSync(db, 'r+');
    for (let page = 3; page < size / 4096 - 1; page += 2) writeSync(fd, Buffer.alloc(4096, 0x5a), 0, 4096, page * 4096);
    closeSync(fd);

    const a = await agentOn(db, broker.url);
    try {
      await waitFor(() => !a.agent.health.get('database').ok, 'the damage noticed');
      expect(a.agent.health.get('database').detail).toMatch(/^the database file is damaged \(database disk image is malformed\)/);
      const health = await fetch(`${a.base}/healthz`);
      expect(health.status).toBe(503);
      const r = await webhook(a.base, vendorRecord());
      expect([200, 503]).toContain(r.status); // 200 only when SQLite could still commit it
      const config = join(dir, 'config.yaml');
      writeFileSync(config, `site: {id: store}\nvendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}}\nwebhook: {enabled: false}\nmqtt: {url: "${broker.url}"}\nstorage: {path: ${db}}\ngpio: {driver: sim}\n`);
      const doctor = await runCli(['doctor', '--config', config]);
      expect(doctor.stdout).toMatch(/FAIL\s+database\s+.*(integrity check|malformed)/);
      // Still alive and serving.
      expect((await fetch(`${a.base}/metrics`)).status).toBe(200);
    } finally {
      await a.agent.stop();
    }
  });

  itWith('mosquitto', 'a stored record whose text was damaged is parked, not published as broken JSON; the others are delivered', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rot-'));
    const db = join(dir, 'agent.db');
    const proxy = new TcpProxy(broker.port);
    await proxy.start();
    proxy.up = false;
    const a = await agentOn(db, proxy.url);
    const sub = await Subscriber.connect(broker.url, 'chair-agent/store/transactions/+');
    try {
      const records = Array.from({ length: 3 }, () => vendorRecord());
      for (const r of records) expect((await webhook(a.base, r)).status).toBe(200);
      const raw = new Database(db);
      raw.prepare("UPDATE transactions SET record = substr(record, 1, 40) WHERE transaction_id = ?").run(records[1]!['TransactionId']);
      raw.close();
      proxy.up = true;
      await waitFor(() => a.agent.outbox.stats().parked === 1 && a.agent.outbox.stats().pending === 1, 'the damaged one parked, the others delivered');
      expect(a.agent.outbox.parking.list()[0]).toMatchObject({ transactionId: records[1]!['TransactionId'], reason: 'its stored text is damaged (checksum mismatch)' });
      for (const m of sub.messages) expect(() => JSON.parse(m.text) as unknown).not.toThrow();
      expect(sub.messages.map((m) => (JSON.parse(m.text) as Record<string, unknown>)['TransactionId']).sort()).toEqual([records[0]!['TransactionId'], records[2]!['TransactionId']].sort());
    } finally {
      await a.agent.stop();
      await sub.close();
      await proxy.stop();
    }
  });

  it('a record nested 5,000 levels deep is 400 (it can never be stored), with no database alarm', async () => {
    const a = await agentOn(join(mkdtempSync(join(tmpdir(), 'deep-')), 'agent.db'), broker.url);
    try {
      const deep = `{"TransactionId":"deep-1","Status":"playing","DeviceId":"MC7001","Extra":${'['.repeat(5000)}1${']'.repeat(5000)}}`;
      const r = await webhook(a.base, deep);
      expect(r.status).toBe(400);
      expect(JSON.parse(r.body)).toEqual({ error: 'not a transaction record: nested deeper than 32 levels' });
      expect(a.agent.health.get('database').ok).toBe(true);
      expect((await webhook(a.base, vendorRecord())).status).toBe(200);
    } finally {
      await a.agent.stop();
    }
  });
});

/** Another process holding the database's write lock (an sqlite3 shell's BEGIN EXCLUSIVE) until released. */
async function lockHolder(db: string): Promise<{ release(): Promise<void> }> {
  const script = `const D=require('better-sqlite3');const d=new D(${JSON.stringify(db)});d.exec('BEGIN EXCLUSIVE');process.stdout.write('locked\\n');process.stdin.on('end',()=>{d.exec('COMMIT');d.close();process.exit(0)});process.stdin.resume();`;
  const child = spawn(process.execPath, ['-e', script], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => d.toString().includes('locked') && resolve());
    child.once('exit', (code) => reject(new Error(`the lock holder exited ${code}`)));
  });
  return {
    release: () =>
      new Promise<void>((resolve) => {
        child.removeAllListeners('exit');
        child.once('exit', () => resolve());
        child.stdin.end();
      }),
  };
}

describe('another process holding the database lock', () => {
  it('keeps the event loop free: health answers at once, chairs stay online, webhooks get 503 with Retry-After, then 200', async () => {
    const db = join(mkdtempSync(join(tmpdir(), 'locked-')), 'agent.db');
    const { agent, base } = await agentOn(db, broker.url);
    const lag = monitorEventLoopDelay({ resolution: 10 });
    try {
      await waitFor(() => agent.registry.view('MC7001')?.online, 'chairs listed');
      expect((await webhook(base, vendorRecord())).status).toBe(200);
      let offline = 0;
      const onAvailability = (_id: string, online: boolean): void => void (online ? undefined : (offline += 1));
      agent.registry.on('availability', onAvailability);
      const lock = await lockHolder(db);
      lag.enable();
      try {
        const answers = await Promise.all([0, 1].map(async () => {
          const body = JSON.stringify(vendorRecord());
          const r = await fetch(`${base}/vendor/webhook`, { method: 'POST', headers: { 'x-vendor-signature': signBody(body, TEST_SECRET) }, body });
          await r.body?.cancel();
          return { status: r.status, retryAfter: r.headers.get('retry-after') };
        }));
        expect(answers).toEqual([{ status: 503, retryAfter: '5' }, { status: 503, retryAfter: '5' }]);
        // A write on the event loop's own connection (the sync's cursor) fails fast, too.
        await agent.sync.run().catch(() => undefined);
        const health = await fetch(`${base}/healthz`);
        expect([200, 503]).toContain(health.status);
        await health.body?.cancel();
      } finally {
        await lock.release();
        lag.disable();
      }
      // Nothing held the event loop for seconds (it was 4.9 s on the old 5 s busy_timeout).
      expect(lag.max / 1e6).toBeLessThan(1_000);
      expect(offline).toBe(0);
      agent.registry.off('availability', onAvailability);
      const again = await webhook(base, vendorRecord());
      expect(again.status).toBe(200);
    } finally {
      await agent.stop();
    }
  });
});
