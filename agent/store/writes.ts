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
// Every record with seq <= the watermark is delivered (schema 4). Records past it are waiting,
// parked or marked delivered one by one (acknowledged out of order); no parked record is ever
// under the watermark, so "waiting" is "past the watermark, not delivered, not parked".
export const WATERMARK = "(SELECT value FROM counters WHERE name = 'delivered_through')";
const GET_WATERMARK = "SELECT value FROM counters WHERE name = 'delivered_through'";
const SET_WATERMARK = "UPDATE counters SET value = ? WHERE name = 'delivered_through'";
/** When the watermark passed a seq: what retention needs of the records it covers. */
const LOG_WATERMARK = `INSERT INTO delivered_through (at, seq) VALUES (?, ?)
  ON CONFLICT (at) DO UPDATE SET seq = max(seq, excluded.seq)`;
const WAITING_IN = 'SELECT COUNT(*) FROM transactions WHERE seq > ? AND seq <= ? AND delivered_at IS NULL AND parked_at IS NULL';
const FIRST_PARKED_IN = `SELECT MIN(seq) FROM transactions INDEXED BY transactions_parked
  WHERE delivered_at IS NULL AND parked_at IS NOT NULL AND seq > ? AND seq <= ?`;
const FIRST_WAITING_PAST = `SELECT MIN(seq) FROM transactions WHERE seq > ? AND delivered_at IS NULL AND parked_at IS NULL`;
const FIRST_PARKED = `SELECT MIN(seq) FROM transactions INDEXED BY transactions_parked WHERE delivered_at IS NULL AND parked_at IS NOT NULL`;
const MAX_SEQ = 'SELECT MAX(seq) FROM transactions';
const DELIVER = 'UPDATE transactions SET delivered_at = ? WHERE seq BETWEEN ? AND ? AND delivered_at IS NULL AND parked_at IS NULL';
const COUNT = 'UPDATE counters SET value = value + ? WHERE name = ?';
const SET_COUNTER = 'UPDATE counters SET value = ? WHERE name = ?';
const PARK = `UPDATE transactions SET parked_at = @now, park_reason = @reason, park_count = park_count + 1, retry_at = @retryAt
  WHERE seq = @seq AND seq > ${WATERMARK} AND delivered_at IS NULL AND parked_at IS NULL`;
const MAKE_DUE = 'UPDATE transactions SET retry_at = ? WHERE delivered_at IS NULL AND parked_at IS NOT NULL';
const UNPARK = 'UPDATE transactions SET parked_at = NULL WHERE delivered_at IS NULL AND parked_at IS NOT NULL AND retry_at <= ?';
// Oldest delivered first, through the delivered index: a batch is a range of it, not a scan.
const PRUNE_MARKED = `DELETE FROM transactions WHERE seq IN (
  SELECT seq FROM transactions WHERE delivered_at IS NOT NULL AND delivered_at < ? ORDER BY delivered_at LIMIT ?)`;
/** The highest seq the watermark had passed before the cutoff. */
const COVERED_BEFORE = 'SELECT MAX(seq) FROM delivered_through WHERE at < ?';
// Those the watermark covered, in seq order: the rowid's own range, no index.
const PRUNE_COVERED = `DELETE FROM transactions WHERE seq IN (
  SELECT seq FROM transactions WHERE seq <= ? AND delivered_at IS NULL ORDER BY seq LIMIT ?)`;
const FORGET_COVERED = 'DELETE FROM delivered_through WHERE at < ?';
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

  /**
   * In-order acknowledgements move the watermark: one counter, however many records. Only those
   * acknowledged past a gap (a parked record, or a PUBACK that came out of order) are marked one
   * by one, and the watermark takes them in once the gap closes.
   */
  private deliver(ranges: [number, number][], at: number): number {
    const s = this.lazy;
    let changed = 0;
    s.db
      .transaction(() => {
        changed = 0;
        const before = s.get<[], number>(GET_WATERMARK).pluck().get() ?? 0;
        let mark = before;
        for (const [first, last] of ranges) {
          if (last <= mark) continue;
          if (first <= mark + 1) {
            // Up to the first parked record in the range, if any: it is not delivered.
            const parked = s.get<[number, number], number | null>(FIRST_PARKED_IN).pluck().get(mark, last) ?? null;
            const end = parked === null ? last : parked - 1;
            if (end > mark) {
              changed += s.get<[number, number], number>(WAITING_IN).pluck().get(mark, end) ?? 0;
              mark = end;
            }
          }
          if (last > mark) changed += s.get(DELIVER).run(at, Math.max(first, mark + 1), last).changes;
        }
        mark = this.watermarkAfter(mark);
        if (mark !== before) {
          s.get(SET_WATERMARK).run(mark);
          s.get(LOG_WATERMARK).run(at, mark);
        }
        if (changed > 0) {
          s.get(COUNT).run(-changed, 'pending');
          s.get(COUNT).run(changed, 'delivered');
          s.get(SET_COUNTER).run(at, 'last_delivery_at');
        }
      })
      .immediate();
    return changed;
  }

  /** Past records marked one by one, up to the first one still waiting or parked (or the last one). */
  private watermarkAfter(mark: number): number {
    const s = this.lazy;
    const waiting = s.get<[number], number | null>(FIRST_WAITING_PAST).pluck().get(mark) ?? null;
    const parked = s.get<[], number | null>(FIRST_PARKED).pluck().get() ?? null;
    const next = waiting === null ? parked : parked === null ? waiting : Math.min(waiting, parked);
    const end = next === null ? (s.get<[], number | null>(MAX_SEQ).pluck().get() ?? 0) : next - 1;
    return Math.max(mark, end);
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

  /** Marked ones by their delivered_at, then those the watermark covered before the cutoff. */
  private prune(before: number, limit: number): number {
    const s = this.lazy;
    let n = 0;
    s.db
      .transaction(() => {
        n = s.get(PRUNE_MARKED).run(before, limit).changes;
        const covered = n < limit ? (s.get<[number], number | null>(COVERED_BEFORE).pluck().get(before) ?? null) : null;
        if (covered !== null) {
          const room = limit - n;
          const m = s.get(PRUNE_COVERED).run(covered, room).changes;
          n += m;
          // All of them gone: the moves before the cutoff have nothing left to say.
          if (m < room) s.get(FORGET_COVERED).run(before);
        }
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
