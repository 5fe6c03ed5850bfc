import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { describe, expect, it, vi } from 'vitest';
import { Outbox } from '../../agent/store/outbox.js';
import { asRecord, vendorRecord, storeAll } from '../helpers/records.js';
import { ROOT } from '../helpers/cli.js';

function store(): { outbox: Outbox; path: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'checkpoints-'));
  const path = join(dir, 'agent.db');
  const outbox = new Outbox({ path, worker: { minFrames: 0, periodMs: 0 } });
  outbox.open();
  return { outbox, path, dir };
}

/** The records a copy of the database file alone holds: what is in it, not only in its WAL. */
function inFileAlone(path: string, dir: string): number {
  const copy = join(dir, `copy-${Math.random().toString(36).slice(2)}.db`);
  copyFileSync(path, copy);
  const db = new Database(copy, { readonly: true });
  try {
    // A new database's schema too is only in the WAL until the first checkpoint.
    if (!db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'transactions'").get()) return 0;
    return (db.prepare('SELECT COUNT(*) AS n FROM transactions').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

describe('the store worker thread (the running agent)', () => {
  it('copies committed records from the WAL into the database file off the event loop', async () => {
    const { outbox, path, dir } = store();
    const done = once(outbox.database, 'checkpointed');
    await storeAll(outbox, [1, 2, 3].map(() => asRecord(vendorRecord())), 'webhook', 1000);
    const [log, copied] = (await done) as [number, number];
    expect(log).toBeGreaterThan(0);
    expect(copied).toBe(log);
    expect(inFileAlone(path, dir)).toBe(3);
    // Delivered marks (not synced on their own) are checkpointed too.
    const next = once(outbox.database, 'checkpointed');
    await outbox.markDelivered(outbox.pending(0, 10).map((r) => r.seq), 2000);
    await next;
    expect(outbox.stats()).toMatchObject({ pending: 0, delivered: 3 });
    outbox.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lets its thread end when writes stop and starts it again with the next write', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'checkpoints-'));
    const path = join(dir, 'agent.db');
    const outbox = new Outbox({ path, worker: { minFrames: 0, periodMs: 0, idleMs: 50 } });
    outbox.open();
    // Nothing written yet: no thread at all (an idle agent carries no second isolate).
    expect(outbox.database.writerThreadRunning).toBe(false);
    await storeAll(outbox, [asRecord(vendorRecord())], 'webhook', 1000);
    expect(outbox.database.writerThreadRunning).toBe(true);
    await vi.waitFor(() => expect(outbox.database.writerThreadRunning).toBe(false), { timeout: 5000 });
    const copied = once(outbox.database, 'checkpointed');
    await storeAll(outbox, [asRecord(vendorRecord())], 'webhook', 2000);
    await copied;
    expect(inFileAlone(path, dir)).toBe(2);
    outbox.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('leaves a quiet box\'s few records in the WAL until minFrames wait, and in the file once stopped', async () => {
    // At a site's pace (a webhook every few minutes) a checkpoint after each quiet spell would
    // copy every lone record's pages again and restart the WAL: four more fsyncs per record.
    const dir = mkdtempSync(join(tmpdir(), 'checkpoints-'));
    const path = join(dir, 'agent.db');
    const outbox = new Outbox({ path, worker: { minFrames: 200, periodMs: 0, idleMs: 50 } });
    outbox.open();
    const runs: number[] = [];
    outbox.database.on('checkpointed', (_log, copied) => runs.push(copied));
    for (let i = 0; i < 3; i++) {
      await storeAll(outbox, [asRecord(vendorRecord())], 'webhook', 1000 + i);
      // The thread ends between records, as it does between a quiet site's webhooks.
      if (i < 2) await vi.waitFor(() => expect(outbox.database.writerThreadRunning).toBe(false), { timeout: 5000 });
    }
    expect(runs).toEqual([]);
    expect(inFileAlone(path, dir)).toBe(0);
    expect(outbox.stats().pending).toBe(3);
    // Stopped with the thread still there: the last connection to close, the thread's, folds the
    // WAL in, and closed() waits for it. A stopped agent's database file is whole.
    expect(outbox.database.writerThreadRunning).toBe(true);
    outbox.close();
    await outbox.closed();
    expect(inFileAlone(path, dir)).toBe(3);
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps checkpointing after NTP steps the wall clock back an hour (the built writer thread, its Date.now stepped)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'checkpoints-'));
    const offsetFile = join(dir, 'wall-offset');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        '--import',
        join(ROOT, 'test/helpers/wall-clock-offset.mjs'),
        join(ROOT, 'test/helpers/checkpoint-after-wall-step.mjs'),
        join(ROOT, 'dist/agent/store/outbox.js'),
        join(dir, 'agent.db'),
        offsetFile,
      ],
      { env: { ...process.env, CHAIR_TEST_WALL_OFFSET_FILE: offsetFile }, timeout: 60_000 },
    );
    expect(JSON.parse(stdout)).toEqual({ checkpointed: true });
    rmSync(dir, { recursive: true, force: true });
  });

  it('copies a burst past minFrames at once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'checkpoints-'));
    const path = join(dir, 'agent.db');
    const outbox = new Outbox({ path, worker: { minFrames: 200, periodMs: 0 } });
    outbox.open();
    const burst = once(outbox.database, 'checkpointed');
    await storeAll(outbox, Array.from({ length: 3000 }, () => asRecord(vendorRecord())), 'webhook', 2000);
    const [, copied] = (await burst) as [number, number];
    expect(copied).toBeGreaterThanOrEqual(200);
    expect(inFileAlone(path, dir)).toBe(3000);
    outbox.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('commits on the worker in the order asked, reporting every record with its seq in that order', async () => {
    const { outbox, dir } = store();
    const seen: number[] = [];
    outbox.on('stored', (records) => seen.push(...records.map((r) => r.seq)));
    const webhook = Array.from({ length: 40 }, () => asRecord(vendorRecord()));
    const polled = Array.from({ length: 40 }, () => asRecord(vendorRecord()));
    const results = await Promise.all([
      ...webhook.map((r, i) => outbox.storeDurably([r], 'webhook', 1000 + i)),
      storeAll(outbox, polled, 'poll', 5000),
      storeAll(outbox, polled.slice(0, 10), 'poll', 6000),
    ]);
    expect(results.slice(0, 40).every((flags) => (flags as boolean[])[0] === true)).toBe(true);
    expect(results.slice(40)).toEqual([40, 0]);
    expect(seen).toHaveLength(80);
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    expect(outbox.stats().pending).toBe(80);
    expect(outbox.pending(0, 100).map((r) => r.transactionId)).toEqual([...webhook, ...polled].map((r) => r.transactionId));
    outbox.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('marks acknowledged records delivered on the worker, counted once, and refuses a mark once closed', async () => {
    const { outbox, dir } = store();
    await storeAll(outbox, Array.from({ length: 30 }, () => asRecord(vendorRecord())), 'poll', 1000);
    const seqs = outbox.pending(0, 100).map((r) => r.seq);
    const delivered: number[] = [];
    outbox.on('delivered', (n) => delivered.push(n));
    // Two runs of seqs with a gap, and a seq marked twice: one transaction, each row once.
    await outbox.markDelivered([...seqs.slice(0, 10), ...seqs.slice(20), seqs[0] as number], 2000);
    expect(outbox.pending(0, 100).map((r) => r.seq)).toEqual(seqs.slice(10, 20));
    expect(outbox.stats()).toMatchObject({ pending: 10, delivered: 20, lastDeliveryAt: 2000 });
    await outbox.markDelivered(seqs, 3000);
    await outbox.markDelivered(seqs.slice(0, 5), 4000);
    expect(delivered).toEqual([20, 10, 0]);
    expect(outbox.stats()).toMatchObject({ pending: 0, delivered: 30, lastDeliveryAt: 3000 });
    outbox.close();
    await expect(outbox.markDelivered([1], 5000)).rejects.toMatchObject({ name: 'StoreError' });
    rmSync(dir, { recursive: true, force: true });
  });

  it('never fails a commit posted as its thread asks to end: the thread ends only when nothing waits', async () => {
    // The thread asks to end after 1 ms without work; commits come every 0-3 ms, so many are
    // posted just as it asks. Each must be committed: none "ended before answering" (a 503 to a
    // webhook on a healthy disk, before the thread asked rather than just ended).
    const dir = mkdtempSync(join(tmpdir(), 'idle-race-'));
    const outbox = new Outbox({ path: join(dir, 'agent.db'), worker: { idleMs: 1 } });
    outbox.open();
    const results = [];
    for (let i = 0; i < 150; i++) {
      results.push(storeAll(outbox, [asRecord(vendorRecord())], 'webhook', 1000 + i).then(() => 'ok', (err: Error) => err.message));
      await new Promise((r) => setTimeout(r, i % 4));
    }
    const outcomes = await Promise.all(results);
    expect(outcomes.filter((o) => o !== 'ok')).toEqual([]);
    expect(outbox.stats().pending).toBe(150);
    outbox.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is not started by writes that change nothing (an idle box: a prune with nothing to prune, a state unchanged)', async () => {
    const { outbox, dir } = store();
    expect(await outbox.pruneDelivered(Date.now(), 100)).toBe(0);
    expect(await outbox.parking.unparkDue(Date.now())).toBe(0);
    expect(outbox.database.writerThreadRunning).toBe(false);
    outbox.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('follows the file when it is deleted and recreated under the agent', async () => {
    const { outbox, path, dir } = store();
    const first = once(outbox.database, 'checkpointed');
    await storeAll(outbox, [asRecord(vendorRecord())], 'webhook', 1000);
    await first;
    rmSync(path);
    rmSync(`${path}-wal`, { force: true });
    rmSync(`${path}-shm`, { force: true });
    const recovered = once(outbox.database, 'recovered');
    const after = once(outbox.database, 'checkpointed');
    await storeAll(outbox, [asRecord(vendorRecord())], 'webhook', 2000);
    expect((await recovered)[0]).toBe(1);
    await after;
    await vi.waitFor(() => expect(inFileAlone(path, dir)).toBe(2), { timeout: 5000 });
    outbox.close();
    rmSync(dir, { recursive: true, force: true });
  });
});
