import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../agent/platform/clock.js';
import { CURSOR_KEY, TransactionSync, type SyncSettings } from '../../agent/vendor/transaction-sync.js';
import { Health } from '../../agent/observe/health.js';
import { silentLogger } from '../../agent/platform/logger.js';
import { Metrics } from '../../agent/observe/metrics.js';
import type { Scheduler } from '../../agent/time/scheduler.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { Outbox } from '../../agent/store/outbox.js';
import { UndiciVendorApi } from '../../agent/vendor/undici-vendor-api.js';
import type { VendorApi } from '../../agent/vendor/vendor-api.js';
import { waitFor } from '../helpers/wait.js';
import { VendorClock } from '../../agent/time/vendor-clock.js';
import { instantToNaive, parseNaive } from '../../agent/time/vendor-time.js';

const KEY = 'sync-key';
let sim: Simulator;

/** A scheduler that never fires: the tests run syncs themselves. */
const manual: Scheduler = { schedule: () => ({ stop: () => undefined }) };

function setup(settings: Partial<SyncSettings> = {}, path?: string, wrap: (v: VendorApi) => VendorApi = (v) => v) {
  const dbPath = path ?? join(mkdtempSync(join(tmpdir(), 'sync-')), 'agent.db');
  const outbox = new Outbox({ path: dbPath });
  outbox.open();
  const vendor = new UndiciVendorApi({ baseUrl: sim.url, apiKey: KEY, timeoutMs: 2000, retries: 0, clock: systemClock, logger: silentLogger() });
  const sync = new TransactionSync({
    vendor: wrap(vendor),
    outbox,
    scheduler: manual,
    clock: systemClock,
    vendorClock: new VendorClock(),
    logger: silentLogger(),
    health: new Health(systemClock),
    metrics: new Metrics({ defaultMetrics: false }),
    settings: {
      schedule: '*/30 * * * * *',
      pageSize: 20,
      lookbackMs: 24 * 3_600_000,
      overlapMs: 60 * 60_000,
      windowMs: 6 * 3_600_000,
      timeFormat: 'local',
      timeZone: 'Asia/Bangkok',
      ...settings,
    },
  });
  return { outbox, vendor, sync, dbPath, close: async () => { await vendor.close(); outbox.close(); } };
}

beforeAll(async () => {
  sim = new Simulator({ apiKey: KEY, chairs: 4 });
  await sim.start();
});
afterAll(() => sim.close());
beforeEach(() => {
  sim.model.transactions.length = 0;
  sim.faults.clear();
  sim.requests.transactions = 0;
});

describe('transaction sync', () => {
  it('pages through several hundred records across windows on the first run', async () => {
    sim.model.backfill(450, 20 * 3_600_000); // spread over the last 20 hours
    const t = setup();
    const result = await t.sync.run();
    expect(result.windows).toBe(4); // 24 h of lookback in 6 h windows
    expect(result.inserted).toBe(450);
    expect(t.outbox.stats().pending).toBe(450);
    const ids = t.outbox.pending(0, 1000).map((r) => r.transactionId);
    expect(new Set(ids).size).toBe(450);
    expect(ids).toEqual([...ids].sort()); // stored in the vendor's chronological order
    // The cursor is the vendor's wall time ("YYYY-MM-DD HH:MM:SS"), here the simulator's Bangkok time.
    expect(parseNaive(t.outbox.state.get(CURSOR_KEY) ?? '')).toBeGreaterThan(instantToNaive(Date.now() - 60_000, 'Asia/Bangkok'));
    await t.close();
  });

  it('uses the from/to format it is configured for', async () => {
    sim.model.backfill(30, 3_600_000);
    for (const timeFormat of ['iso', 'unix', 'unix-ms'] as const) {
      const t = setup({ timeFormat });
      expect((await t.sync.run()).inserted).toBe(30);
      await t.close();
    }
  });

  it('keeps its cursor on a vendor error mid-way, and the next run gets everything', async () => {
    sim.model.backfill(200, 4 * 3_600_000);
    const t = setup({ lookbackMs: 5 * 3_600_000 }); // one window
    sim.faults.add({ mode: 'error', status: 500, count: 1, after: 4, endpoints: ['transactions'] });
    await expect(t.sync.run()).rejects.toThrow(/HTTP 500/);
    expect(t.outbox.state.get(CURSOR_KEY)).toBeUndefined();
    const partial = t.outbox.stats().pending;
    expect(partial).toBe(80); // the four pages before the failure are kept
    const result = await t.sync.run();
    expect(t.outbox.stats().pending).toBe(200);
    expect(result.inserted).toBe(120);
    await t.close();
  });

  it('resumes from the persisted cursor after a restart, re-reading the overlap', async () => {
    sim.model.backfill(10, 30 * 60_000);
    const first = setup();
    await first.sync.run();
    const path = first.dbPath;
    await first.close();
    // A record that shows up late, dated before the cursor but inside the overlap.
    const chair = sim.model.chairs.get('MC7002')!;
    sim.model.backfill(1, 10 * 60_000, chair.deviceId);
    const again = setup({}, path);
    const result = await again.sync.run();
    expect(result.inserted).toBe(1);
    expect(again.outbox.stats().pending).toBe(11);
    await again.close();
  });

  it('stores a playing record again when it becomes finished', async () => {
    const t = setup();
    const started = sim.model.start('MC7003', 1, 'promptpay');
    expect(started.ok).toBe(true);
    await t.sync.run();
    sim.model.transactions.at(-1)!.record['Status'] = 'finished';
    await t.sync.run();
    const rows = t.outbox.pending(0, 10);
    expect(rows.map((r) => r.status)).toEqual(['playing', 'finished']);
    expect(new Set(rows.map((r) => r.transactionId)).size).toBe(1);
    sim.model.chairs.get('MC7003')!.sessionEndsAt = null;
    await t.close();
  });

  it('never runs over itself: what is asked for during a run is one more run after it', async () => {
    sim.model.backfill(100, 3_600_000);
    const t = setup();
    const first = t.sync.run();
    const [second, third] = [t.sync.run(), t.sync.run()];
    expect(third).toBe(second);
    const [a, b] = await Promise.all([first, second]);
    expect(a.inserted).toBe(100);
    expect(b.inserted).toBe(0);
    expect(sim.requests.transactions).toBe(a.requests + b.requests);
    await t.close();
  });

  it('answers a run asked for while one is under way with what the vendor added meanwhile', async () => {
    sim.model.backfill(5, 3_600_000);
    // The first run's pages are read, then held: it is under way when the record comes.
    let release = (): void => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    let reads = 0;
    const t = setup({}, undefined, (v) =>
      Object.assign(Object.create(v) as VendorApi, {
        listTransactions: async (...args: Parameters<VendorApi['listTransactions']>) => {
          const page = await v.listTransactions(...args);
          reads += 1;
          await held;
          return page;
        },
      }),
    );
    const started = Date.now();
    const first = t.sync.run();
    await waitFor(() => reads > 0, 'the first run reading the list');
    // A record dated after the first run's window ends (the vendor's times are whole seconds).
    await waitFor(() => Math.floor(Date.now() / 1000) > Math.floor(started / 1000), 'the next second');
    sim.model.backfill(1, 0);
    const second = t.sync.run();
    expect(second).not.toBe(first);
    release();
    expect((await first).inserted).toBe(5);
    expect((await second).inserted).toBe(1);
    expect(t.outbox.stats().pending).toBe(6);
    await t.close();
  });

  it('writes nothing on a run that finds nothing new', async () => {
    sim.model.backfill(25, 3_600_000);
    const t = setup();
    await t.sync.run();
    const before = ['', '-wal'].map((x) => statSync(`${t.dbPath}${x}`).mtimeMs).join();
    for (let i = 0; i < 5; i++) expect((await t.sync.run()).inserted).toBe(0);
    expect(['', '-wal'].map((x) => statSync(`${t.dbPath}${x}`).mtimeMs).join()).toBe(before);
    await t.close();
  });
});
