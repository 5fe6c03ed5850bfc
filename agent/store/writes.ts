// Every write the outbox makes, as one transaction each, over the two write connections: the
// durable one (synchronous=FULL: a new record is on disk before anyone is told it is stored) and
// the lazy one (synchronous=NORMAL: a delivered mark, a park or a prune lost to a power cut is
// only made again). Each connection keeps its setting for life: no per-call toggle.
//
// Used by the writer thread (store-writer.ts) and, without one (an in-memory database, the CLI),
// by InlineWriter on the event loop. Only type imports: the writer thread runs this file as it is.
import type BetterSqlite3 from 'better-sqlite3';
import type { CommitRow } from './records.ts';

type Database = BetterSqlite3.Database;

/** A write, as posted to the writer; each has exactly one result of the same `op`. */
export type WriteOp =
  /** New records, in order: each one's seq, or null when (TransactionId, Status) is stored already. */
  | { op: 'store'; rows: CommitRow[] }
  /** Seq ranges whose PUBACK came. */
  | { op: 'deliver'; ranges: [number, number][]; at: number }
  /** Set a record aside until retryAt. */
  | { op: 'park'; seq: number; reason: string; now: number; retryAt: number }
  /** Parked records due by `now` go back to waiting; `all` makes every parked record due first. */
  | { op: 'unpark'; now: number; all: boolean }
  /** Delete at most `limit` records delivered before `before`. */
  | { op: 'prune'; before: number; limit: number }
  /** A value of the agent's own state (sync cursor, announced chairs...). */
  | { op: 'state'; key: string; value: string };

export type WriteResult =
  | { op: 'store'; seqs: (number | null)[] }
  | { op: 'deliver'; changed: number }
  | { op: 'park'; parked: boolean }
  | { op: 'unpark'; unparked: number }
  | { op: 'prune'; pruned: number }
  | { op: 'state'; changed: boolean };

/** The result type for one kind of write. */
export type ResultOf<K extends WriteOp['op']> = Extract<WriteResult, { op: K }>;

const INSERT = `INSERT OR IGNORE INTO transactions (transaction_id, status, device_id, record, source, received_at, record_crc, start_request)
  VALUES (@transactionId, @status, @deviceId, @record, @source, @receivedAt, @crc, @startRequest) RETURNING seq`;
const DELIVER = 'UPDATE transactions SET delivered_at = ? WHERE seq BETWEEN ? AND ? AND delivered_at IS NULL AND parked_at IS NULL';
const COUNT = 'UPDATE counters SET value = value + ? WHERE name = ?';
const SET_COUNTER = 'UPDATE counters SET value = ? WHERE name = ?';
const PARK = `UPDATE transactions SET parked_at = @now, park_reason = @reason, park_count = park_count + 1, retry_at = @retryAt
  WHERE seq = @seq AND delivered_at IS NULL AND parked_at IS NULL`;
const MAKE_DUE = 'UPDATE transactions SET retry_at = ? WHERE delivered_at IS NULL AND parked_at IS NOT NULL';
const UNPARK = 'UPDATE transactions SET parked_at = NULL WHERE delivered_at IS NULL AND parked_at IS NOT NULL AND retry_at <= ?';
// Oldest delivered first, through the delivered index: a batch is a range of it, not a scan.
const PRUNE = `DELETE FROM transactions WHERE seq IN (
  SELECT seq FROM transactions WHERE delivered_at IS NOT NULL AND delivered_at < ? ORDER BY delivered_at LIMIT ?)`;
const GET_STATE = 'SELECT value FROM state WHERE key = ?';
const SET_STATE = 'INSERT INTO state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value';

/** Prepared once per connection, on first use. */
class Statements {
  private readonly cache = new Map<string, BetterSqlite3.Statement<unknown[], unknown>>();
  readonly db: Database;
  // No parameter properties here: Node strips this file's types, it does not transform it.
  constructor(db: Database) {
    this.db = db;
  }
  /** Typed by its parameters and the row it returns. */
  get<P extends unknown[] | [object] = unknown[], R = unknown>(sql: string): BetterSqlite3.Statement<P, R> {
    let s = this.cache.get(sql);
    if (!s) {
      s = this.db.prepare<unknown[], unknown>(sql);
      this.cache.set(sql, s);
    }
    return s as unknown as BetterSqlite3.Statement<P, R>;
  }
}

export interface WriteConnections {
  /** synchronous=FULL: new records. */
  durable: Database;
  /** synchronous=NORMAL: everything that is only made again if lost. May be the durable one (in memory). */
  lazy: Database;
}

export class Writes {
  private readonly durable: Statements;
  private readonly lazy: Statements;

  constructor(connections: WriteConnections) {
    this.durable = new Statements(connections.durable);
    this.lazy = new Statements(connections.lazy);
  }

  run(w: WriteOp): WriteResult {
    switch (w.op) {
      case 'store':
        return { op: 'store', seqs: this.store(w.rows) };
      case 'deliver':
        return { op: 'deliver', changed: this.deliver(w.ranges, w.at) };
      case 'park':
        return { op: 'park', parked: this.park(w.seq, w.reason, w.now, w.retryAt) };
      case 'unpark':
        return { op: 'unpark', unparked: this.unpark(w.now, w.all) };
      case 'prune':
        return { op: 'prune', pruned: this.prune(w.before, w.limit) };
      case 'state':
        return { op: 'state', changed: this.state(w.key, w.value) };
    }
  }

  private store(rows: CommitRow[]): (number | null)[] {
    const s = this.durable;
    const seqs: (number | null)[] = [];
    s.db
      .transaction(() => {
        seqs.length = 0;
        let n = 0;
        for (const row of rows) {
          const r = s.get<[CommitRow], { seq: number }>(INSERT).get(row);
          seqs.push(r ? r.seq : null);
          if (r) n++;
        }
        if (n > 0) s.get(COUNT).run(n, 'pending');
      })
      .immediate();
    return seqs;
  }

  private deliver(ranges: [number, number][], at: number): number {
    const s = this.lazy;
    let changed = 0;
    s.db
      .transaction(() => {
        changed = 0;
        for (const [first, last] of ranges) changed += s.get(DELIVER).run(at, first, last).changes;
        if (changed > 0) {
          s.get(COUNT).run(-changed, 'pending');
          s.get(COUNT).run(changed, 'delivered');
          s.get(SET_COUNTER).run(at, 'last_delivery_at');
        }
      })
      .immediate();
    return changed;
  }

  private park(seq: number, reason: string, now: number, retryAt: number): boolean {
    const s = this.lazy;
    let parked = false;
    s.db
      .transaction(() => {
        parked = s.get(PARK).run({ seq, now, reason: reason.slice(0, 500), retryAt }).changes > 0;
        if (parked) s.get(COUNT).run(1, 'parked');
      })
      .immediate();
    return parked;
  }

  private unpark(now: number, all: boolean): number {
    const s = this.lazy;
    let n = 0;
    s.db
      .transaction(() => {
        if (all) s.get(MAKE_DUE).run(now);
        n = s.get(UNPARK).run(now).changes;
        if (n > 0) s.get(COUNT).run(-n, 'parked');
      })
      .immediate();
    return n;
  }

  private prune(before: number, limit: number): number {
    const s = this.lazy;
    let n = 0;
    s.db
      .transaction(() => {
        n = s.get(PRUNE).run(before, limit).changes;
        if (n > 0) s.get(COUNT).run(-n, 'delivered');
      })
      .immediate();
    return n;
  }

  /** Writes only when the value differs: an idle agent leaves the SD card alone. */
  private state(key: string, value: string): boolean {
    const s = this.lazy;
    if (s.get<[string], string>(GET_STATE).pluck().get(key) === value) return false;
    s.get(SET_STATE).run(key, value);
    return true;
  }
}
