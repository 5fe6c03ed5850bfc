import { EventEmitter } from 'node:events';
import { crc32 } from 'node:zlib';
import type { TransactionRecord } from '../vendor/vendor-api.js';
import { AgentState } from './agent-state.js';
import { StoreDatabase, type DatabaseOptions } from './database.js';
import { readStats, type OutboxStats } from './outbox-stats.js';
import { Parking } from './parking.js';
import { WATERMARK } from './writes.js';
import { RECORD_COLUMNS, type CommitRow, type RecordRange, type RecordSource, type StoredRecord } from './records.js';

export type { OutboxStats } from './outbox-stats.js';
export type { ParkedRecord, RecordRange, RecordSource, StoredRecord } from './records.js';
export { recordIntact } from './records.js';
export { parkRetryDelayMs } from './parking.js';
export { StoreError, type StoreErrorCode } from './store-error.js';

export interface OutboxEvents {
  /** New records were committed (also records made deliverable again). */
  inserted: [count: number];
  /** The records a commit added, as stored, just before `inserted` (the publisher takes them without reading them back). */
  stored: [records: readonly StoredRecord[]];
  /** Records were marked delivered. */
  delivered: [count: number];
}

/** Gives a record being stored its start request (POS correlation), or null. */
export type Annotate = (record: TransactionRecord) => string | null;

export type OutboxOptions = DatabaseOptions;

const PENDING = `SELECT ${RECORD_COLUMNS} FROM transactions WHERE seq > max(?, ${WATERMARK}) AND delivered_at IS NULL AND parked_at IS NULL ORDER BY seq LIMIT ?`;
const BY_SEQ = `SELECT ${RECORD_COLUMNS} FROM transactions WHERE seq BETWEEN ? AND ? AND received_at BETWEEN ? AND ? ORDER BY seq LIMIT ?`;
const BY_TIME = `SELECT ${RECORD_COLUMNS} FROM transactions INDEXED BY transactions_received
  WHERE received_at BETWEEN ? AND ? AND seq BETWEEN ? AND ? ORDER BY received_at, seq LIMIT ?`;
const BY_IDS = `SELECT ${RECORD_COLUMNS} FROM transactions WHERE transaction_id = ? AND status = ?`;
const CONTAINING = `SELECT ${RECORD_COLUMNS} FROM transactions WHERE seq BETWEEN ? AND ? AND instr(record, ?) > 0 ORDER BY seq`;
const EXISTS = 'SELECT 1 FROM transactions WHERE transaction_id = ? AND status = ?';
type Range5 = [number, number, number, number, number];
const MAX_SEQ = 'SELECT MAX(seq) FROM transactions';
// A record marked delivered before the cutoff, or a move of the watermark before it.
const ANY_TO_PRUNE = `SELECT EXISTS (SELECT 1 FROM transactions WHERE delivered_at IS NOT NULL AND delivered_at < @before)
  OR EXISTS (SELECT 1 FROM delivered_through WHERE at < @before)`;

/**
 * The durable outbox of transaction records: every record is committed (WAL, synchronous=FULL)
 * before anything acknowledges it, and stays until the broker has acknowledged it. A record seen
 * again (same TransactionId and Status) is not stored twice. Nothing is written when nothing is
 * new: an idle agent leaves the SD card alone.
 *
 * The records are this class; the file and its writer are `database`, the parking policy
 * `parking`, the agent's own small state `state`.
 */
export class Outbox extends EventEmitter<OutboxEvents> {
  readonly database: StoreDatabase;
  readonly parking: Parking;
  readonly state: AgentState;

  constructor(opts: OutboxOptions) {
    super();
    this.database = new StoreDatabase(opts);
    this.parking = new Parking(this.database, (n) => this.emit('inserted', n));
    this.state = new AgentState(this.database);
  }

  get path(): string {
    return this.database.path;
  }

  get isOpen(): boolean {
    return this.database.isOpen;
  }

  /** See StoreDatabase.changeCount. */
  get changeCount(): number {
    return this.database.changeCount;
  }

  /** Null while writes succeed, else why the last one failed. */
  get failure(): string | null {
    return this.database.failure;
  }

  /** Opens (creating and migrating when needed). Throws STORE_OPEN_FAILED naming the path. */
  open(): void {
    this.database.open();
  }

  close(): void {
    this.database.close();
  }

  /** Resolves once the database file is whole after close() (Database.closed). */
  closed(): Promise<void> {
    return this.database.closed();
  }

  /**
   * Stores the records that are new, in the given order, in one transaction, and resolves once
   * that commit is on disk (synchronous=FULL): only then may anyone be told they are stored. Says
   * for each record whether it was new (false: already stored, or an earlier record of the same
   * call had its TransactionId and Status). The webhook's group commit rests on this.
   */
  async storeDurably(records: readonly TransactionRecord[], source: RecordSource, receivedAt: number, annotate?: Annotate): Promise<boolean[]> {
    const flags = new Array<boolean>(records.length).fill(false);
    const fresh = this.freshOf(records, source);
    if (fresh.length === 0) return flags;
    const rows: CommitRow[] = fresh.map((i) => {
      const r = records[i] as TransactionRecord;
      const record = JSON.stringify(r.fields);
      return { transactionId: r.transactionId, status: r.status, deviceId: r.deviceId, record, source, receivedAt, crc: crc32(record), startRequest: annotate?.(r) ?? null };
    });
    const { seqs } = await this.database.write('storing transactions', { op: 'store', rows });
    const stored: StoredRecord[] = [];
    seqs.forEach((seq, k) => {
      if (seq === null) return;
      flags[fresh[k] as number] = true;
      stored.push({ ...(rows[k] as CommitRow), seq });
    });
    if (stored.length > 0) {
      this.database.changed();
      this.emit('stored', stored);
      this.emit('inserted', stored.length);
    }
    return flags;
  }

  /** Indexes of the records to write: the first of each (TransactionId, Status), not already stored. */
  private freshOf(records: readonly TransactionRecord[], source: RecordSource): number[] {
    const firsts = firstOfEach(records);
    // Reading first keeps a sync over known records (its overlap window) from asking for a write
    // at all. A webhook's record is almost always new: INSERT OR IGNORE is enough.
    if (source === 'webhook') return firsts;
    const exists = this.database.statement<[string, string], 1>(EXISTS).pluck();
    return this.database.read('reading stored transactions', () => firsts.filter((i) => !exists.get(records[i]!.transactionId, records[i]!.status)));
  }

  /**
   * Marks records delivered (their PUBACK came), in one transaction; resolves once committed,
   * rejects with a StoreError (the records are then still waiting). The commit is not synced to
   * disk on its own (the lazy connection, synchronous=NORMAL): losing it to a power cut only means
   * the records are sent again, which at-least-once allows, and it saves an fsync per batch.
   */
  async markDelivered(seqs: readonly number[], at: number): Promise<void> {
    if (seqs.length === 0) return;
    const { changed } = await this.database.write('marking records delivered', { op: 'deliver', ranges: runs(seqs), at });
    if (changed > 0) this.database.changed();
    this.emit('delivered', changed);
  }

  /** Deletes at most `limit` records delivered before `before`, never an undelivered one; resolves to how many. */
  async pruneDelivered(before: number, limit: number): Promise<number> {
    // Looked for first through the delivered index: an idle box's daily prune wakes no writer.
    if (!this.database.read('reading delivered records', () => this.database.statement<[{ before: number }], number>(ANY_TO_PRUNE).pluck().get({ before }))) return 0;
    const { pruned } = await this.database.write('pruning delivered records', { op: 'prune', before, limit });
    if (pruned > 0) this.database.changed();
    return pruned;
  }

  /** Undelivered, unparked records after `afterSeq`, oldest first. */
  pending(afterSeq: number, limit: number): StoredRecord[] {
    return this.database.read('reading waiting transactions', () => this.database.statement<[number, number], StoredRecord>(PENDING).all(afterSeq, limit));
  }

  /**
   * Stored records, delivered or not (until retention prunes them), in a seq range and/or a time
   * range of receipt, oldest first, at most `limit`. A time range is read through its index.
   */
  range(q: RecordRange, limit: number): StoredRecord[] {
    const fromSeq = q.fromSeq ?? 0;
    const toSeq = q.toSeq ?? Number.MAX_SAFE_INTEGER;
    const from = q.from ?? 0;
    const to = q.to ?? Number.MAX_SAFE_INTEGER;
    const byTime = q.from !== undefined || q.to !== undefined;
    return this.database.read('reading stored transactions', () =>
      byTime ? this.database.statement<Range5, StoredRecord>(BY_TIME).all(from, to, fromSeq, toSeq, limit) : this.database.statement<Range5, StoredRecord>(BY_SEQ).all(fromSeq, toSeq, from, to, limit),
    );
  }

  /**
   * Stored records in a seq range whose text contains `text` (today's summary looks for its date),
   * oldest first. The rows are matched inside SQLite, so a range of thousands of other days' rows
   * costs a scan, not thousands of objects.
   */
  containing(text: string, fromSeq: number, toSeq: number): StoredRecord[] {
    return this.database.read('reading stored transactions', () => this.database.statement<[number, number, string], StoredRecord>(CONTAINING).all(fromSeq, toSeq, text));
  }

  /** The newest record's seq (0 when there is none). */
  lastSeq(): number {
    return this.database.read('reading stored transactions', () => this.database.statement<[], number | null>(MAX_SEQ).pluck().get() ?? 0);
  }

  /** The stored record with this TransactionId and Status, delivered or not. */
  find(transactionId: string, status: string): StoredRecord | undefined {
    return this.database.read('reading a transaction', () => this.database.statement<[string, string], StoredRecord>(BY_IDS).get(transactionId, status));
  }

  stats(): OutboxStats {
    return readStats(this.database);
  }
}

/** Consecutive seqs as [first, last] runs: PUBACKs mostly come in order, so few statements. */
function runs(seqs: readonly number[]): [number, number][] {
  const sorted = [...seqs].sort((a, b) => a - b);
  const out: [number, number][] = [];
  for (const seq of sorted) {
    const last = out[out.length - 1];
    if (last && seq === last[1] + 1) last[1] = seq;
    else if (!last || seq > last[1]) out.push([seq, seq]);
  }
  return out;
}

/** Indexes of the first record of each (TransactionId, Status), in order. */
function firstOfEach(records: readonly TransactionRecord[]): number[] {
  const seen = new Set<string>();
  const out: number[] = [];
  records.forEach((r, i) => {
    const key = `${r.transactionId}\u0000${r.status}`;
    if (seen.has(key)) return;
    seen.add(key);
    out.push(i);
  });
  return out;
}
