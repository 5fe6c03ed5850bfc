import { EventEmitter } from 'node:events';
import Database from 'better-sqlite3';
import { AgentError, errorCode, errorMessage } from '../errors.js';
import type { TransactionRecord } from '../vendor/vendor-api.js';
import { migrate } from './migrations.js';

export type RecordSource = 'webhook' | 'poll';

export interface StoredRecord {
  seq: number;
  transactionId: string;
  status: string;
  deviceId: string;
  /** The vendor's record as JSON text, fields verbatim. */
  record: string;
  source: RecordSource;
  receivedAt: number;
}

export interface OutboxStats {
  pending: number;
  oldestPendingAt: number | null;
  delivered: number;
  lastDeliveryAt: number | null;
}

export interface OutboxEvents {
  /** New records were committed. */
  inserted: [count: number];
  /** Records were marked delivered. */
  delivered: [count: number];
  /** A write failed after succeeding, or succeeded after failing. */
  writable: [ok: boolean, detail: string];
}

export type StoreErrorCode = 'STORE_FULL' | 'STORE_FAILED' | 'STORE_OPEN_FAILED';

export class StoreError extends AgentError {
  declare readonly code: StoreErrorCode;
  constructor(code: StoreErrorCode, message: string, cause?: unknown) {
    super(code, message, cause === undefined ? undefined : { cause });
    this.name = 'StoreError';
  }
}

function storeError(err: unknown, doing: string): StoreError {
  const code = errorCode(err);
  if (code === 'SQLITE_FULL') return new StoreError('STORE_FULL', `database full while ${doing} (disk or storage.maxSizeMb)`, err);
  return new StoreError('STORE_FAILED', `database error while ${doing}: ${errorMessage(err)}`, err);
}

export interface OutboxOptions {
  path: string;
  /** Caps the database size (PRAGMA max_page_count). */
  maxSizeMb?: number | undefined;
  readonly?: boolean;
}

/**
 * The durable outbox of transaction records: every record is committed (WAL, synchronous=FULL)
 * before anything acknowledges it, and stays until the broker has acknowledged it. A record
 * seen again (same TransactionId and Status) is not stored twice. Nothing is written when nothing
 * is new: an idle agent leaves the SD card alone.
 */
export class Outbox extends EventEmitter<OutboxEvents> {
  private db: Database.Database | null = null;
  private statements: ReturnType<Outbox['prepare']> | null = null;
  private writeFailure: string | null = null;

  constructor(private readonly opts: OutboxOptions) {
    super();
  }

  get path(): string {
    return this.opts.path;
  }

  /** Opens (creating and migrating when needed). Throws STORE_OPEN_FAILED naming the path. */
  open(): void {
    if (this.db) return;
    const { opts } = this;
    try {
      const db = new Database(opts.path, { readonly: opts.readonly ?? false, fileMustExist: opts.readonly ?? false });
      this.db = db;
      db.pragma('busy_timeout = 5000');
      if (!opts.readonly) {
        db.pragma('journal_mode = WAL');
        db.pragma('synchronous = FULL');
        migrate(db);
        if (opts.maxSizeMb !== undefined) {
          const pageSize = db.pragma('page_size', { simple: true }) as number;
          db.pragma(`max_page_count = ${Math.max(16, Math.floor((opts.maxSizeMb * 1024 * 1024) / pageSize))}`);
        }
      }
      this.statements = this.prepare();
    } catch (err) {
      this.close();
      throw new StoreError('STORE_OPEN_FAILED', `cannot open the database ${opts.path}: ${errorMessage(err)} (storage.path)`, err);
    }
  }

  get isOpen(): boolean {
    return this.db !== null;
  }

  private get stmt(): ReturnType<Outbox['prepare']> {
    if (!this.statements) throw new StoreError('STORE_FAILED', 'the database is not open');
    return this.statements;
  }

  private prepare() {
    const db = this.db as Database.Database;
    return {
      exists: db.prepare('SELECT 1 FROM transactions WHERE transaction_id = ? AND status = ?').pluck(),
      insert: db.prepare(
        `INSERT OR IGNORE INTO transactions (transaction_id, status, device_id, record, source, received_at)
         VALUES (@transactionId, @status, @deviceId, @record, @source, @receivedAt)`,
      ),
      pending: db.prepare(
        `SELECT seq, transaction_id AS transactionId, status, device_id AS deviceId, record, source, received_at AS receivedAt
         FROM transactions WHERE delivered_at IS NULL AND seq > ? ORDER BY seq LIMIT ?`,
      ),
      deliver: db.prepare('UPDATE transactions SET delivered_at = ? WHERE seq BETWEEN ? AND ? AND delivered_at IS NULL'),
      pendingStats: db.prepare('SELECT COUNT(*) AS n, MIN(received_at) AS oldest FROM transactions WHERE delivered_at IS NULL'),
      deliveredStats: db.prepare('SELECT COUNT(*) AS n, MAX(delivered_at) AS last FROM transactions WHERE delivered_at IS NOT NULL'),
      prune: db.prepare('DELETE FROM transactions WHERE delivered_at IS NOT NULL AND delivered_at < ?'),
      getState: db.prepare('SELECT value FROM state WHERE key = ?').pluck(),
      setState: db.prepare('INSERT INTO state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value'),
    };
  }

  /**
   * Commits the records that are new, in the given order, in one transaction, optionally with a
   * state value (the sync cursor) so both land together. Returns how many were new.
   */
  insert(records: readonly TransactionRecord[], source: RecordSource, receivedAt: number, state?: { key: string; value: string }): number {
    // Reading first keeps a run over known records from opening a write transaction at all.
    const fresh = records.filter((r) => !this.stmt.exists.get(r.transactionId, r.status));
    const unique = dedupe(fresh);
    if (unique.length === 0 && state === undefined) return 0;
    let inserted = 0;
    try {
      (this.db as Database.Database).transaction(() => {
        for (const r of unique) {
          inserted += this.stmt.insert.run({
            transactionId: r.transactionId,
            status: r.status,
            deviceId: r.deviceId,
            record: JSON.stringify(r.fields),
            source,
            receivedAt,
          }).changes;
        }
        if (state) this.stmt.setState.run(state.key, state.value);
      }).immediate();
    } catch (err) {
      throw this.failed(err, 'storing transactions');
    }
    this.succeeded();
    if (inserted > 0) this.emit('inserted', inserted);
    return inserted;
  }

  /** Undelivered records after `afterSeq`, oldest first. */
  pending(afterSeq: number, limit: number): StoredRecord[] {
    return this.stmt.pending.all(afterSeq, limit) as StoredRecord[];
  }

  /**
   * Marks records delivered (their PUBACK came), in one transaction. This commit is not synced to
   * disk on its own (synchronous=NORMAL): losing it to a power cut only means the records are
   * sent again, which at-least-once allows, and it saves an fsync per batch (SD card wear, and
   * an event loop that would otherwise stall on every batch). New records always get FULL.
   */
  markDelivered(seqs: readonly number[], at: number): void {
    if (seqs.length === 0) return;
    const db = this.db as Database.Database;
    try {
      db.pragma('synchronous = NORMAL');
      db.transaction(() => {
        for (const [first, last] of runs(seqs)) this.stmt.deliver.run(at, first, last);
      }).immediate();
    } catch (err) {
      throw this.failed(err, 'marking records delivered');
    } finally {
      if (db.open) db.pragma('synchronous = FULL');
    }
    this.succeeded();
    this.emit('delivered', seqs.length);
  }

  stats(): OutboxStats {
    if (!this.db) return { pending: 0, oldestPendingAt: null, delivered: 0, lastDeliveryAt: null };
    const p = this.stmt.pendingStats.get() as { n: number; oldest: number | null };
    const d = this.stmt.deliveredStats.get() as { n: number; last: number | null };
    return { pending: p.n, oldestPendingAt: p.oldest, delivered: d.n, lastDeliveryAt: d.last };
  }

  /** Deletes delivered records older than `before`; undelivered records are never pruned. */
  prune(before: number): number {
    try {
      const n = this.stmt.prune.run(before).changes;
      this.succeeded();
      return n;
    } catch (err) {
      throw this.failed(err, 'pruning delivered records');
    }
  }

  getState(key: string): string | undefined {
    return this.stmt.getState.get(key) as string | undefined;
  }

  /** Writes only when the value differs. */
  setState(key: string, value: string): void {
    if (this.getState(key) === value) return;
    try {
      this.stmt.setState.run(key, value);
    } catch (err) {
      throw this.failed(err, `saving ${key}`);
    }
    this.succeeded();
  }

  /** Null while writes succeed, else why the last one failed. */
  get failure(): string | null {
    return this.writeFailure;
  }

  private failed(err: unknown, doing: string): StoreError {
    const e = storeError(err, doing);
    if (this.writeFailure !== e.message) {
      this.writeFailure = e.message;
      this.emit('writable', false, e.message);
    }
    return e;
  }

  private succeeded(): void {
    if (this.writeFailure === null) return;
    this.writeFailure = null;
    this.emit('writable', true, 'writable');
  }

  integrityCheck(): string {
    return (this.db as Database.Database).pragma('integrity_check', { simple: true }) as string;
  }

  close(): void {
    const db = this.db;
    this.db = null;
    this.statements = null;
    if (db?.open) db.close();
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

/** Keeps the first of records that repeat (TransactionId, Status) within one batch. */
function dedupe(records: readonly TransactionRecord[]): TransactionRecord[] {
  const seen = new Set<string>();
  return records.filter((r) => {
    const key = `${r.transactionId}\u0000${r.status}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
