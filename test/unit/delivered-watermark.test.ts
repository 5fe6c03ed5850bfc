import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../agent/store/migrations.js';
import { Outbox } from '../../agent/store/outbox.js';
import { asRecord, storeAll, vendorRecord } from '../helpers/records.js';

function dbPath(): string {
  return join(mkdtempSync(join(tmpdir(), 'watermark-')), 'agent.db');
}

async function stored(outbox: Outbox, n: number, at: number): Promise<number[]> {
  await storeAll(outbox, Array.from({ length: n }, () => asRecord(vendorRecord())), 'webhook', at);
  return outbox.pending(0, n + 100).map((r) => r.seq);
}

/** Pages written to the WAL so far (each frame is one page). */
function walFrames(outbox: Outbox): number {
  return (outbox.database.statement<[], { log: number }>('PRAGMA wal_checkpoint(PASSIVE)').get()?.log ?? 0) as number;
}

const waiting = (outbox: Outbox): number[] => outbox.pending(0, 1000).map((r) => r.seq);

describe('delivered records', () => {
  it('in order: a whole flush is delivered without writing each record again', async () => {
    const outbox = new Outbox({ path: dbPath() });
    outbox.open();
    const seqs = await stored(outbox, 2000, 1_000);
    outbox.database.statement('PRAGMA wal_checkpoint(TRUNCATE)').run();
    await outbox.markDelivered(seqs, 2_000);
    expect(waiting(outbox)).toEqual([]);
    expect(outbox.stats()).toMatchObject({ pending: 0, delivered: 2000, lastDeliveryAt: 2_000 });
    // 2,000 records of some 400 bytes on 1 KiB pages: marking each one rewrote ~1,000 pages.
    expect(walFrames(outbox)).toBeLessThan(20);
    outbox.close();
  });

  it('out of order: later records delivered first stay delivered, earlier ones stay waiting until they are', async () => {
    const outbox = new Outbox({ path: dbPath() });
    outbox.open();
    const [a, b, c, d] = await stored(outbox, 4, 1_000);
    await outbox.markDelivered([c!, d!], 2_000);
    expect(waiting(outbox)).toEqual([a, b]);
    expect(outbox.stats()).toMatchObject({ pending: 2, delivered: 2 });
    await outbox.markDelivered([b!], 3_000);
    expect(waiting(outbox)).toEqual([a]);
    await outbox.markDelivered([a!], 4_000);
    expect(waiting(outbox)).toEqual([]);
    // Acknowledged again (a resend after a reconnect): counted once.
    await outbox.markDelivered([a!, b!, c!, d!], 5_000);
    expect(outbox.stats()).toMatchObject({ pending: 0, delivered: 4 });
    outbox.close();
  });

  it('a parked record in the middle stays parked while those around it are delivered, and is delivered once it is retried', async () => {
    const outbox = new Outbox({ path: dbPath() });
    outbox.open();
    const [a, b, c, d, e] = await stored(outbox, 5, 1_000);
    expect(await outbox.parking.park(c!, 'refused by the broker: not authorized', 1_500)).not.toBeNull();
    await outbox.markDelivered([a!, b!, d!, e!], 2_000);
    expect(waiting(outbox)).toEqual([]);
    expect(outbox.parking.list().map((r) => r.seq)).toEqual([c]);
    expect(outbox.stats()).toMatchObject({ pending: 1, parked: 1, delivered: 4 });
    // A delivered record cannot be parked (a refusal for a copy sent twice).
    expect(await outbox.parking.park(a!, 'refused', 2_500)).toBeNull();
    expect(await outbox.parking.retryAllNow(3_000)).toBe(1);
    expect(waiting(outbox)).toEqual([c]);
    await outbox.markDelivered([c!], 4_000);
    expect(waiting(outbox)).toEqual([]);
    expect(outbox.stats()).toMatchObject({ pending: 0, parked: 0, delivered: 5 });
    // And the next records go the fast way again: new ones wait, nothing old comes back.
    const [f] = (await stored(outbox, 1, 5_000)).filter((s) => s > e!);
    expect(waiting(outbox)).toEqual([f]);
    outbox.close();
  });

  it('retention prunes delivered records older than the cutoff, whichever way they were delivered, and never a waiting or parked one', async () => {
    const outbox = new Outbox({ path: dbPath() });
    outbox.open();
    const [a, b, c, d] = await stored(outbox, 4, 1_000);
    await outbox.markDelivered([b!], 2_000); // out of order: marked by itself
    await outbox.markDelivered([a!], 3_000); // in order: the watermark passes a and b
    await outbox.parking.park(d!, 'refused', 3_500);
    await outbox.markDelivered([c!], 9_000);
    const [e] = (await stored(outbox, 1, 9_500)).filter((s) => s > d!);
    expect(await outbox.pruneDelivered(5_000, 100)).toBe(2);
    expect(outbox.range({}, 100).map((r) => r.seq)).toEqual([c, d, e]);
    expect(outbox.stats()).toMatchObject({ pending: 2, parked: 1, delivered: 1 });
    expect(await outbox.pruneDelivered(5_000, 100)).toBe(0);
    expect(await outbox.pruneDelivered(10_000, 100)).toBe(1);
    expect(outbox.range({}, 100).map((r) => r.seq)).toEqual([d, e]);
    expect(waiting(outbox)).toEqual([e]);
    outbox.close();
  });

  it('a database from the release before keeps its waiting records and its delivered history', async () => {
    const path = dbPath();
    const old = new Database(path);
    old.pragma('journal_mode = WAL');
    for (const sql of MIGRATIONS.slice(0, 3)) old.exec(sql);
    old.pragma('user_version = 3');
    const insert = old.prepare(`INSERT INTO transactions (transaction_id, status, device_id, record, source, received_at, delivered_at)
      VALUES (?, 'finished', 'MC7001', '{}', 'poll', 1000, ?)`);
    for (let i = 1; i <= 6; i++) insert.run(`OLD${i}`, i <= 2 || i === 4 ? 2_000 : null);
    old.exec("UPDATE counters SET value = 3 WHERE name = 'pending'; UPDATE counters SET value = 3 WHERE name = 'delivered'");
    old.close();

    const outbox = new Outbox({ path, worker: true });
    outbox.open();
    expect(waiting(outbox)).toEqual([3, 5, 6]);
    await outbox.markDelivered([3], 3_000);
    expect(waiting(outbox)).toEqual([5, 6]);
    expect(outbox.stats()).toMatchObject({ pending: 2, delivered: 4 });
    expect(await outbox.pruneDelivered(4_000, 100)).toBe(4);
    expect(outbox.range({}, 100).map((r) => r.transactionId)).toEqual(['OLD5', 'OLD6']);
    outbox.close();
  });

  it('a database file deleted under the agent is made again with only the records still waiting', async () => {
    const path = dbPath();
    const outbox = new Outbox({ path, worker: true });
    outbox.open();
    const [a, b, c] = await stored(outbox, 3, 1_000);
    await outbox.markDelivered([a!, b!], 2_000);
    for (const f of [path, `${path}-wal`, `${path}-shm`]) rmSync(f, { force: true });
    const recovered = once(outbox.database, 'recovered');
    await storeAll(outbox, [asRecord(vendorRecord())], 'webhook', 3_000);
    expect((await recovered)[0]).toBe(1);
    const seqs = waiting(outbox);
    expect(seqs[0]).toBe(c);
    expect(seqs).toHaveLength(2);
    expect(outbox.stats()).toMatchObject({ pending: 2 });
    outbox.close();
  });
});
