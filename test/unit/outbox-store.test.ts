import { MIGRATIONS } from '../../agent/store/migrations.js';
import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { Outbox, StoreError } from '../../agent/store/outbox.js';
import { asRecord, vendorRecord, storeAll } from '../helpers/records.js';

function openStore(maxSizeMb?: number): { outbox: Outbox; path: string } {
  const path = join(mkdtempSync(join(tmpdir(), 'outbox-')), 'agent.db');
  const outbox = new Outbox({ path, maxSizeMb });
  outbox.open();
  return { outbox, path };
}

/** Size and modification time of the database and its WAL: what an SD card would see written. */
function footprint(path: string): string {
  return [path, `${path}-wal`].map((p) => {
    try {
      const s = statSync(p);
      return `${s.size}@${s.mtimeMs}`;
    } catch {
      return 'absent';
    }
  }).join(' ');
}

describe('outbox store', () => {
  it('keeps one row per (TransactionId, Status), in the order they arrived', async () => {
    const { outbox } = openStore();
    const playing = vendorRecord({ Status: 'playing' });
    const other = vendorRecord();
    expect(await storeAll(outbox, [asRecord(playing), asRecord(other)], 'webhook', 1000)).toBe(2);
    expect(await storeAll(outbox, [asRecord(playing)], 'poll', 2000)).toBe(0);
    const finished = { ...playing, Status: 'finished' };
    expect(await storeAll(outbox, [asRecord(finished), asRecord(finished)], 'poll', 3000)).toBe(1);
    const rows = outbox.pending(0, 10);
    expect(rows.map((r) => [r.transactionId, r.status, r.source])).toEqual([
      [playing['TransactionId'], 'playing', 'webhook'],
      [other['TransactionId'], 'playing', 'webhook'],
      [playing['TransactionId'], 'finished', 'poll'],
    ]);
    expect(JSON.parse(rows[0]!.record)).toEqual(playing);
    outbox.close();
  });

  it('keeps records until marked delivered, and counts the backlog', async () => {
    const { outbox } = openStore();
    await storeAll(outbox, [1, 2, 3].map(() => asRecord(vendorRecord())), 'poll', 5_000);
    const [a, b] = outbox.pending(0, 10);
    await outbox.markDelivered([a!.seq, b!.seq], 9_000);
    expect(outbox.stats()).toEqual({ pending: 1, oldestPendingAt: 5_000, parked: 0, delivered: 2, lastDeliveryAt: 9_000 });
    expect(outbox.pending(0, 10)).toHaveLength(1);
    expect(outbox.pending(b!.seq, 10).map((r) => r.seq)).toEqual([b!.seq + 1]);
    outbox.close();
  });

  it('writes nothing to disk when nothing is new', async () => {
    const { outbox, path } = openStore();
    const known = [1, 2, 3].map(() => asRecord(vendorRecord()));
    await storeAll(outbox, known, 'poll', 1000);
    await outbox.state.set('sync.cursor', '42');
    const before = footprint(path);
    for (let i = 0; i < 20; i++) {
      await storeAll(outbox, known, 'poll', 2000 + i);
      await outbox.state.set('sync.cursor', '42');
      outbox.stats();
      outbox.pending(0, 100);
    }
    expect(footprint(path)).toBe(before);
    outbox.close();
  });

  it('creates its schema once and reopens without migrating again', async () => {
    const { outbox, path } = openStore();
    await storeAll(outbox, [asRecord(vendorRecord())], 'poll', 1);
    outbox.close();
    const raw = new Database(path);
    expect(raw.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
    expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
    raw.close();
    const again = new Outbox({ path });
    again.open();
    expect(again.stats().pending).toBe(1);
    again.close();
  });

  it('refuses a database from a newer agent instead of damaging it', async () => {
    const { outbox, path } = openStore();
    outbox.close();
    const raw = new Database(path);
    raw.pragma('user_version = 99');
    raw.close();
    const newer = new Outbox({ path });
    expect(() => newer.open()).toThrow(/schema version 99, newer than this agent knows/);
  });

  it('prunes only delivered records older than the retention, never undelivered ones', async () => {
    const { outbox } = openStore();
    await storeAll(outbox, [1, 2, 3].map(() => asRecord(vendorRecord())), 'poll', 0);
    const [old, recent] = outbox.pending(0, 10);
    await outbox.markDelivered([old!.seq], 1_000);
    await outbox.markDelivered([recent!.seq], 50_000);
    expect(await outbox.pruneDelivered(10_000, 100)).toBe(1);
    expect(outbox.stats()).toMatchObject({ pending: 1, delivered: 1 });
    expect(await outbox.pruneDelivered(Number.MAX_SAFE_INTEGER, 100)).toBe(1);
    expect(outbox.stats()).toMatchObject({ pending: 1, delivered: 0 });
    outbox.close();
  });

  it('when the database is full: refuses new records with STORE_FULL, keeps every stored one, and recovers after a prune', async () => {
    const { outbox } = openStore(0.25);
    const events: [boolean, string][] = [];
    outbox.database.on('writable', (ok, detail) => events.push([ok, detail]));
    const big = 'x'.repeat(2000);
    let stored = 0;
    let error: unknown;
    for (let i = 0; i < 1000 && !error; i++) {
      try {
        stored += await storeAll(outbox, [asRecord(vendorRecord({ Label: big }))], 'webhook', i);
      } catch (err) {
        error = err;
      }
    }
    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).code).toBe('STORE_FULL');
    expect(events).toEqual([[false, 'database full while storing transactions (disk or storage.maxSizeMb)']]);
    expect(outbox.stats().pending).toBe(stored);
    expect(outbox.database.integrityCheck()).toBe('ok');

    const all = outbox.pending(0, 10_000).map((r) => r.seq);
    await outbox.markDelivered(all, 1);
    while (await outbox.pruneDelivered(2, 1000) > 0);
    expect(await storeAll(outbox, [asRecord(vendorRecord())], 'webhook', 5)).toBe(1);
    expect(events.at(-1)).toEqual([true, 'writable']);
    outbox.close();
  });
});

describe('a lock held by another process', () => {
  const locked = (lockReportAfterMs?: number) => {
    const path = join(mkdtempSync(join(tmpdir(), 'locked-store-')), 'agent.db');
    // As the running agent: writes on the writer thread.
    const outbox = new Outbox({ path, lockReportAfterMs, worker: { busyTimeoutMs: 100 } });
    outbox.open();
    const events: string[] = [];
    outbox.database.on('writable', (ok) => events.push(ok ? 'writable' : 'not writable'));
    const other = new Database(path);
    other.exec('BEGIN IMMEDIATE');
    return { outbox, other, events };
  };

  it('never holds the event loop: the write waits on the writer thread, fails as STORE_LOCKED, and is reported only once the lock outlasts a moment', async () => {
    const brief = locked();
    const order: string[] = [];
    const write = brief.outbox.state.set('cursor', 'x').then(
      () => order.push('written'),
      (err: unknown) => order.push((err as StoreError).code),
    );
    // The loop turns while the write waits on the lock (it would not, had the write been made here).
    await new Promise<void>((resolve) => setImmediate(() => resolve(void order.push('loop turned'))));
    await write;
    expect(order).toEqual(['loop turned', 'STORE_LOCKED']);
    expect(brief.events).toEqual([]); // a backup's moment or a slow fsync: not a database alarm
    brief.other.exec('COMMIT');
    await brief.outbox.state.set('cursor', 'x');
    expect(brief.outbox.state.get('cursor')).toBe('x');

    const lasting = locked(0);
    await expect(lasting.outbox.state.set('cursor', 'y')).rejects.toThrow(StoreError);
    expect(lasting.events).toEqual(['not writable']);
    expect(lasting.outbox.failure).toMatch(/locked by another process/);
    lasting.other.exec('COMMIT');
    await lasting.outbox.state.set('cursor', 'y');
    expect(lasting.events).toEqual(['not writable', 'writable']);
    for (const o of [brief, lasting]) {
      o.other.close();
      o.outbox.close();
    }
  });
});

describe('the page size', () => {
  it('makes a new database with 1 KiB pages, and keeps using one an earlier release made with 4 KiB pages', async () => {
    const { outbox, path } = openStore();
    await storeAll(outbox, [asRecord(vendorRecord())], 'webhook', 1);
    outbox.close();
    const made = new Database(path, { readonly: true });
    expect(made.pragma('page_size', { simple: true })).toBe(1024);
    made.close();

    const oldPath = join(mkdtempSync(join(tmpdir(), 'old-pages-')), 'agent.db');
    const old = new Database(oldPath);
    old.pragma('page_size = 4096');
    old.pragma('journal_mode = WAL');
    for (const sql of MIGRATIONS) old.exec(sql);
    old.pragma(`user_version = ${MIGRATIONS.length}`);
    old.close();
    const upgraded = new Outbox({ path: oldPath, worker: true });
    upgraded.open();
    expect(await storeAll(upgraded, [asRecord(vendorRecord()), asRecord(vendorRecord())], 'webhook', 2)).toBe(2);
    expect(upgraded.stats().pending).toBe(2);
    expect(upgraded.database.statement<[], number>('PRAGMA page_size').pluck().get()).toBe(4096);
    upgraded.close();
  });
});
