import { EventEmitter } from 'node:events';
import { statSync } from 'node:fs';
import { crc32 } from 'node:zlib';
import Database from 'better-sqlite3';
import { AgentError, errorCode, errorMessage } from '../platform/errors.js';
import type { TransactionRecord } from '../vendor/vendor-api.js';
import { StoreWorker, type CheckpointerTuning, type CommitRow } from './store-worker.js';
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
  /** CRC-32 of `record` when it was stored (null for rows stored before checksums). */
  crc: number | null;
  /** The start request this record was tied to (POS correlation), as JSON text, if any. */
  startRequest?: string | null;
}

/** Which stored records to give again (bridge request `resend`): a seq range and/or a time range of receipt. */
export interface RecordRange {
  fromSeq?: number | undefined;
  toSeq?: number | undefined;
  /** Epoch ms, received at or after. */
  from?: number | undefined;
  /** Epoch ms, received at or before. */
  to?: number | undefined;
}

export interface ParkedRecord {
  seq: number;
  transactionId: string;
  status: string;
  deviceId: string;
  parkedAt: number;
  reason: string;
  parkCount: number;
  retryAt: number;
}

export interface OutboxStats {
  /** Waiting for the broker, parked ones included. */
  pending: number;
  oldestPendingAt: number | null;
  /** Of those waiting, the ones the broker refused, set aside and retried later. */
  parked: number;
  delivered: number;
  lastDeliveryAt: number | null;
}

export interface OutboxEvents {
  /** New records were committed (also records made deliverable again). */
  inserted: [count: number];
  /** The records a commit added, as stored, just before `inserted` (the publisher takes them without reading them back). */
  stored: [records: readonly StoredRecord[]];
  /** Records were marked delivered. */
  delivered: [count: number];
  /** A write failed after succeeding, or succeeded after failing. */
  writable: [ok: boolean, detail: string];
  /** The database file was deleted or replaced under the agent; this many waiting records were moved into a new one. */
  recovered: [moved: number];
  /** A background checkpoint failed (null: they work again). The WAL then grows until one succeeds or the writer checkpoints itself. */
  checkpoint: [problem: string | null];
  /** A background checkpoint ran: frames in the WAL, and how many of them are in the database file now. */
  checkpointed: [log: number, copied: number];
}

export type StoreErrorCode = 'STORE_FULL' | 'STORE_FAILED' | 'STORE_OPEN_FAILED' | 'STORE_DAMAGED' | 'STORE_GONE' | 'STORE_LOCKED';

export class StoreError extends AgentError {
  declare readonly code: StoreErrorCode;
  constructor(code: StoreErrorCode, message: string, cause?: unknown) {
    super(code, message, cause === undefined ? undefined : { cause });
    this.name = 'StoreError';
  }
}

const isSqliteError = (err: unknown): boolean => err instanceof Database.SqliteError || (err instanceof Error && err.name === 'SqliteError');

function storeError(err: unknown, doing: string): StoreError {
  const code = errorCode(err) ?? '';
  if (code === 'SQLITE_FULL') return new StoreError('STORE_FULL', `database full while ${doing} (disk or storage.maxSizeMb)`, err);
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) {
    return new StoreError('STORE_LOCKED', `the database is locked by another process (an sqlite3 shell, a backup?) while ${doing}`, err);
  }
  if (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB') {
    return new StoreError('STORE_DAMAGED', `the database file is damaged (${errorMessage(err)}) while ${doing}`, err);
  }
  return new StoreError('STORE_FAILED', `database error while ${doing}: ${errorMessage(err)}`, err);
}

/** How long a write on the event loop's connection waits for a lock held elsewhere. */
const MAIN_BUSY_TIMEOUT_MS = 50;
/** How long writes may fail on such a lock before health and the log say so. */
const LOCK_REPORT_AFTER_MS = 2_000;

/** Parked records are retried 1 h after they were parked, then 2, 4, 8, 16 and at most every 24 h. */
export function parkRetryDelayMs(parkCount: number): number {
  return Math.min(24 * 3_600_000, 3_600_000 * 2 ** Math.max(0, parkCount - 1));
}

/** Gives a record being stored its start request (POS correlation), or null. */
export type Annotate = (record: TransactionRecord) => string | null;

export interface OutboxOptions {
  path: string;
  /** Caps the database size (PRAGMA max_page_count). */
  maxSizeMb?: number | undefined;
  readonly?: boolean;
  /**
   * A second connection on a worker thread (the running agent) for the writes that wait on the
   * disk: commitEach() (the webhook's group commits) and WAL checkpoints, so the event loop never
   * waits on their fsyncs. Without it both run on the caller's thread.
   */
  worker?: boolean | CheckpointerTuning;
  /** How long writes may fail on a lock held elsewhere before it is reported (default 2 s). */
  lockReportAfterMs?: number;
}

/** Pages in the WAL before a commit checkpoints inline: SQLite's 1000 would stall longer. */
const INLINE_CHECKPOINT_PAGES = 250;
/** With background checkpoints the writer only checkpoints itself if they fall this far behind (16 MB). */
const FALLBACK_CHECKPOINT_PAGES = 4000;

const INSERT_SQL = `INSERT OR IGNORE INTO transactions (transaction_id, status, device_id, record, source, received_at, record_crc, start_request)
         VALUES (@transactionId, @status, @deviceId, @record, @source, @receivedAt, @crc, @startRequest) RETURNING seq`;

const DELIVER_SQL = 'UPDATE transactions SET delivered_at = ? WHERE seq BETWEEN ? AND ? AND delivered_at IS NULL AND parked_at IS NULL';

const COLUMNS = 'seq, transaction_id AS transactionId, status, device_id AS deviceId, record, source, received_at AS receivedAt, record_crc AS crc, start_request AS startRequest';

/**
 * The durable outbox of transaction records: every record is committed (WAL, synchronous=FULL)
 * before anything acknowledges it, and stays until the broker has acknowledged it. A record
 * seen again (same TransactionId and Status) is not stored twice. Nothing is written when nothing
 * is new: an idle agent leaves the SD card alone.
 *
 * The file is watched: deleted or replaced under the running agent, it is recreated and every
 * waiting record moved into it before the next write is acknowledged; damaged, every use reports
 * it (StoreError STORE_DAMAGED) instead of throwing where nobody catches.
 */
export class Outbox extends EventEmitter<OutboxEvents> {
  private db: Database.Database | null = null;
  private statements: ReturnType<Outbox['prepare']> | null = null;
  private writeFailure: string | null = null;
  /** When writes began to fail on a lock held elsewhere (performance.now()), while they do. */
  private lockedSince: number | null = null;
  private failureCode: StoreErrorCode | null = null;
  private identity: { dev: number; ino: number } | null = null;
  private worker: StoreWorker | null = null;
  private maxPageCount: number | undefined;
  private checkpointProblem: string | null = null;
  private changes = 0;

  constructor(private readonly opts: OutboxOptions) {
    super();
  }

  get path(): string {
    return this.opts.path;
  }

  /**
   * Goes up by one with every successful write on either connection (and on a reopen), just
   * before its events: a reader that saw the count unchanged knows nothing was written since.
   */
  get changeCount(): number {
    return this.changes;
  }

  private get inMemory(): boolean {
    return this.opts.path === ':memory:' || this.opts.path === '';
  }

  /** Opens (creating and migrating when needed). Throws STORE_OPEN_FAILED naming the path. */
  open(): void {
    if (this.db) return;
    try {
      this.db = this.openFile();
      this.changes += 1;
      this.statements = this.prepare();
      this.identity = this.fileIdentity();
      if (this.opts.worker && !this.inMemory && !this.opts.readonly) this.useWorker();
    } catch (err) {
      this.close();
      throw new StoreError('STORE_OPEN_FAILED', `cannot open the database ${this.opts.path}: ${errorMessage(err)} (storage.path)`, err);
    }
  }

  private openFile(): Database.Database {
    const { opts } = this;
    const db = new Database(opts.path, { readonly: opts.readonly ?? false, fileMustExist: opts.readonly ?? false });
    try {
      // This connection is the event loop's: a write waits at most this long for a lock (the
      // store thread's commit takes a few ms) and then fails as STORE_LOCKED, rather than
      // holding every poll, publish and HTTP answer while another process holds the file.
      db.pragma(`busy_timeout = ${MAIN_BUSY_TIMEOUT_MS}`);
      if (!opts.readonly) {
        db.pragma('journal_mode = WAL');
        db.pragma('synchronous = FULL');
        db.pragma(`wal_autocheckpoint = ${opts.worker ? FALLBACK_CHECKPOINT_PAGES : INLINE_CHECKPOINT_PAGES}`);
        migrate(db);
        if (opts.maxSizeMb !== undefined) {
          const pageSize = db.pragma('page_size', { simple: true }) as number;
          this.maxPageCount = Math.max(16, Math.floor((opts.maxSizeMb * 1024 * 1024) / pageSize));
          db.pragma(`max_page_count = ${this.maxPageCount}`);
        }
      }
      return db;
    } catch (err) {
      db.close();
      throw err;
    }
  }

  private useWorker(): void {
    const tuning = typeof this.opts.worker === 'object' ? this.opts.worker : {};
    this.worker = new StoreWorker({
      ...tuning,
      path: this.opts.path,
      insertSql: INSERT_SQL,
      deliverSql: DELIVER_SQL,
      maxPageCount: this.maxPageCount,
      onDone: (r) => {
        this.checkpointed(null);
        this.emit('checkpointed', r.log, r.checkpointed);
      },
      onError: (problem) => this.checkpointed(problem),
    });
  }

  private checkpointed(problem: string | null): void {
    if (problem === this.checkpointProblem) return;
    this.checkpointProblem = problem;
    this.emit('checkpoint', problem);
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
      insert: db.prepare(INSERT_SQL),
      pending: db.prepare(`SELECT ${COLUMNS} FROM transactions WHERE delivered_at IS NULL AND parked_at IS NULL AND seq > ? ORDER BY seq LIMIT ?`),
      bySeq: db.prepare(`SELECT ${COLUMNS} FROM transactions WHERE seq BETWEEN ? AND ? AND received_at BETWEEN ? AND ? ORDER BY seq LIMIT ?`),
      byTime: db.prepare(
        `SELECT ${COLUMNS} FROM transactions INDEXED BY transactions_received WHERE received_at BETWEEN ? AND ? AND seq BETWEEN ? AND ? ORDER BY received_at, seq LIMIT ?`,
      ),
      byIds: db.prepare(`SELECT ${COLUMNS} FROM transactions WHERE transaction_id = ? AND status = ?`),
      containing: db.prepare(`SELECT ${COLUMNS} FROM transactions WHERE seq BETWEEN ? AND ? AND instr(record, ?) > 0 ORDER BY seq`),
      maxSeq: db.prepare('SELECT MAX(seq) FROM transactions').pluck(),
      deliver: db.prepare(DELIVER_SQL),
      oldestPending: db.prepare('SELECT received_at FROM transactions WHERE delivered_at IS NULL AND parked_at IS NULL ORDER BY seq LIMIT 1').pluck(),
      oldestParked: db.prepare('SELECT MIN(received_at) FROM transactions WHERE delivered_at IS NULL AND parked_at IS NOT NULL').pluck(),
      counters: db.prepare('SELECT name, value FROM counters'),
      count: db.prepare('UPDATE counters SET value = value + ? WHERE name = ?'),
      setCounter: db.prepare('UPDATE counters SET value = ? WHERE name = ?'),
      park: db.prepare(
        `UPDATE transactions SET parked_at = @now, park_reason = @reason, park_count = park_count + 1, retry_at = @retryAt
         WHERE seq = @seq AND delivered_at IS NULL AND parked_at IS NULL`,
      ),
      parkCount: db.prepare('SELECT park_count FROM transactions WHERE seq = ?').pluck(),
      unparkDue: db.prepare('UPDATE transactions SET parked_at = NULL WHERE delivered_at IS NULL AND parked_at IS NOT NULL AND retry_at <= ?'),
      retryAllParked: db.prepare('UPDATE transactions SET retry_at = ? WHERE delivered_at IS NULL AND parked_at IS NOT NULL'),
      nextRetry: db.prepare('SELECT MIN(retry_at) FROM transactions WHERE delivered_at IS NULL AND parked_at IS NOT NULL').pluck(),
      parked: db.prepare(
        `SELECT seq, transaction_id AS transactionId, status, device_id AS deviceId, parked_at AS parkedAt, park_reason AS reason,
                park_count AS parkCount, retry_at AS retryAt
         FROM transactions WHERE delivered_at IS NULL AND parked_at IS NOT NULL ORDER BY seq LIMIT ?`,
      ),
      pruneBatch: db.prepare(
        `DELETE FROM transactions WHERE seq IN (
           SELECT seq FROM transactions WHERE delivered_at IS NOT NULL AND delivered_at < ? ORDER BY delivered_at LIMIT ?)`,
      ),
      getState: db.prepare('SELECT value FROM state WHERE key = ?').pluck(),
      setState: db.prepare('INSERT INTO state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value'),
    };
  }

  /** Runs a statement; a SQLite failure is reported (health) and thrown as a StoreError. */
  private guard<T>(doing: string, fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      if (err instanceof StoreError) throw err;
      if (isSqliteError(err)) throw this.failed(err, doing);
      throw err;
    }
  }

  private fileIdentity(): { dev: number; ino: number } | null {
    if (this.inMemory || this.opts.readonly) return null;
    const st = statSync(this.opts.path);
    return { dev: st.dev, ino: st.ino };
  }

  /**
   * True while the file at storage.path is the one open. A file deleted or replaced under a
   * running agent would take every later write with it: it is recreated at the path, with every
   * waiting record (and the sync cursor) moved in, before anything else is written.
   */
  ensureFile(doing: string): void {
    if (!this.identity || !this.db) return;
    let current: { dev: number; ino: number } | null;
    try {
      const st = statSync(this.opts.path);
      current = { dev: st.dev, ino: st.ino };
    } catch {
      current = null;
    }
    if (current && current.dev === this.identity.dev && current.ino === this.identity.ino) return;
    const what = current ? 'replaced' : 'deleted';
    let moved: number;
    try {
      moved = this.recreate();
    } catch (err) {
      const e = new StoreError('STORE_GONE', `the database file ${this.opts.path} was ${what} while running and cannot be recreated (${errorMessage(err)}) while ${doing}`, err);
      this.reportFailure(e.code, e.message);
      throw e;
    }
    this.emit('recovered', moved);
    this.committed();
  }

  private recreate(): number {
    const old = this.db as Database.Database;
    const fresh = this.openFile();
    let moved = 0;
    try {
      const copy = fresh.prepare(
        `INSERT OR IGNORE INTO transactions (seq, transaction_id, status, device_id, record, source, received_at, parked_at, park_reason, park_count, retry_at, record_crc, start_request)
         VALUES (@seq, @transaction_id, @status, @device_id, @record, @source, @received_at, @parked_at, @park_reason, @park_count, @retry_at, @record_crc, @start_request)`,
      );
      const copyState = fresh.prepare('INSERT INTO state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value');
      fresh
        .transaction(() => {
          for (const row of old.prepare('SELECT * FROM transactions WHERE delivered_at IS NULL ORDER BY seq').iterate()) moved += copy.run(row as Record<string, unknown>).changes;
          for (const row of old.prepare('SELECT key, value FROM state').iterate()) {
            const r = row as { key: string; value: string };
            copyState.run(r.key, r.value);
          }
          recount(fresh);
        })
        .immediate();
    } catch (err) {
      fresh.close();
      throw err;
    }
    this.db = fresh;
    this.statements = this.prepare();
    this.identity = this.fileIdentity();
    this.worker?.reopen();
    old.close();
    return moved;
  }

  /**
   * Commits the records that are new, in the given order, in one transaction, optionally with a
   * state value (the sync cursor) so both land together. Returns how many were new.
   */
  insert(records: readonly TransactionRecord[], source: RecordSource, receivedAt: number, state?: { key: string; value: string }, annotate?: Annotate): number {
    return this.insertEach(records, source, receivedAt, state, annotate).reduce((n, isNew) => n + (isNew ? 1 : 0), 0);
  }

  /**
   * As insert(), and says for each record whether it was new (false: already stored, or an
   * earlier record of the same call had its TransactionId and Status). One commit for all: the
   * webhook's group commit rests on this.
   */
  insertEach(records: readonly TransactionRecord[], source: RecordSource, receivedAt: number, state?: { key: string; value: string }, annotate?: Annotate): boolean[] {
    this.ensureFile('storing transactions');
    const flags = new Array<boolean>(records.length).fill(false);
    const fresh = this.freshOf(records, source);
    if (fresh.length === 0 && state === undefined) return flags;
    let inserted = 0;
    const stored: StoredRecord[] = [];
    this.guard('storing transactions', () =>
      (this.db as Database.Database)
        .transaction(() => {
          stored.length = 0;
          inserted = 0;
          for (const i of fresh) {
            const r = records[i] as TransactionRecord;
            const record = JSON.stringify(r.fields);
            const crc = crc32(record);
            const startRequest = annotate?.(r) ?? null;
            const row = this.stmt.insert.get({ transactionId: r.transactionId, status: r.status, deviceId: r.deviceId, record, source, receivedAt, crc, startRequest }) as
              | { seq: number }
              | undefined;
            flags[i] = row !== undefined;
            if (row) {
              inserted += 1;
              stored.push({ seq: row.seq, transactionId: r.transactionId, status: r.status, deviceId: r.deviceId, record, source, receivedAt, crc, startRequest });
            }
          }
          if (inserted > 0) this.stmt.count.run(inserted, 'pending');
          if (state) this.stmt.setState.run(state.key, state.value);
        })
        .immediate(),
    );
    this.committed();
    if (inserted > 0) {
      this.emit('stored', stored);
      this.emit('inserted', inserted);
    }
    return flags;
  }

  /** As commitEach(); returns how many were new. */
  async commit(records: readonly TransactionRecord[], source: RecordSource, receivedAt: number, annotate?: Annotate): Promise<number> {
    return (await this.commitEach(records, source, receivedAt, annotate)).filter(Boolean).length;
  }

  /** Indexes of the records to write: the first of each (TransactionId, Status), not already stored. */
  private freshOf(records: readonly TransactionRecord[], source: RecordSource): number[] {
    const firsts = firstOfEach(records);
    // Reading first keeps a sync over known records (its overlap window) from opening a write
    // transaction at all. A webhook's record is almost always new: INSERT OR IGNORE is enough.
    if (source === 'webhook') return firsts;
    return this.guard('reading stored transactions', () => firsts.filter((i) => !this.stmt.exists.get(records[i]!.transactionId, records[i]!.status)));
  }

  /**
   * As insertEach() (without sync state), committed on the worker thread when there is one, so
   * the event loop does not wait on the fsync; resolves once the commit is on disk. Every insert
   * of the running agent goes this way, so commits are reported in the order of their seqs.
   */
  async commitEach(records: readonly TransactionRecord[], source: RecordSource, receivedAt: number, annotate?: Annotate): Promise<boolean[]> {
    const worker = this.worker;
    if (!worker) return this.insertEach(records, source, receivedAt, undefined, annotate);
    this.ensureFile('storing transactions');
    const flags = new Array<boolean>(records.length).fill(false);
    const firsts = this.freshOf(records, source);
    if (firsts.length === 0) return flags;
    const rows: CommitRow[] = firsts.map((i) => {
      const r = records[i] as TransactionRecord;
      const record = JSON.stringify(r.fields);
      return { transactionId: r.transactionId, status: r.status, deviceId: r.deviceId, record, source, receivedAt, crc: crc32(record), startRequest: annotate?.(r) ?? null };
    });
    let seqs: (number | null)[];
    try {
      seqs = await worker.commit(rows);
    } catch (err) {
      throw this.failed(err, 'storing transactions');
    }
    this.changes += 1;
    const stored: StoredRecord[] = [];
    seqs.forEach((seq, k) => {
      if (seq === null) return;
      flags[firsts[k] as number] = true;
      stored.push({ ...(rows[k] as CommitRow), source, seq });
    });
    this.succeeded();
    if (stored.length > 0) {
      this.emit('stored', stored);
      this.emit('inserted', stored.length);
    }
    return flags;
  }

  /** Undelivered, unparked records after `afterSeq`, oldest first. */
  pending(afterSeq: number, limit: number): StoredRecord[] {
    return this.guard('reading waiting transactions', () => this.stmt.pending.all(afterSeq, limit) as StoredRecord[]);
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
    return this.guard('reading stored transactions', () =>
      (byTime ? this.stmt.byTime.all(from, to, fromSeq, toSeq, limit) : this.stmt.bySeq.all(fromSeq, toSeq, from, to, limit)) as StoredRecord[],
    );
  }

  /**
   * Stored records in a seq range whose text contains `text` (today's summary looks for its date),
   * oldest first. The rows are matched inside SQLite, so a range of thousands of other days' rows
   * costs a scan, not thousands of objects.
   */
  containing(text: string, fromSeq: number, toSeq: number): StoredRecord[] {
    return this.guard('reading stored transactions', () => this.stmt.containing.all(fromSeq, toSeq, text) as StoredRecord[]);
  }

  /** The newest record's seq (0 when there is none). */
  lastSeq(): number {
    return this.guard('reading stored transactions', () => (this.stmt.maxSeq.get() as number | null) ?? 0);
  }

  /** The stored record with this TransactionId and Status, delivered or not. */
  find(transactionId: string, status: string): StoredRecord | undefined {
    return this.guard('reading a transaction', () => this.stmt.byIds.get(transactionId, status) as StoredRecord | undefined);
  }

  /**
   * Marks records delivered (their PUBACK came), in one transaction. This commit is not synced to
   * disk on its own (synchronous=NORMAL): losing it to a power cut only means the records are
   * sent again, which at-least-once allows, and it saves an fsync per batch (SD card wear, and
   * an event loop that would otherwise stall on every batch). New records always get FULL.
   */
  markDelivered(seqs: readonly number[], at: number): void {
    if (seqs.length === 0) return;
    const db = this.db;
    if (!db) throw new StoreError('STORE_FAILED', 'the database is not open');
    let changed = 0;
    try {
      this.guard('marking records delivered', () => {
        db.pragma('synchronous = NORMAL');
        db.transaction(() => {
          for (const [first, last] of runs(seqs)) changed += this.stmt.deliver.run(at, first, last).changes;
          if (changed > 0) {
            this.stmt.count.run(-changed, 'pending');
            this.stmt.count.run(changed, 'delivered');
            this.stmt.setCounter.run(at, 'last_delivery_at');
          }
        }).immediate();
      });
    } finally {
      if (db.open) {
        try {
          db.pragma('synchronous = FULL');
        } catch {
          // reported by the failed write already
        }
      }
    }
    if (changed > 0) this.committed();
    else this.succeeded();
    this.emit('delivered', changed);
  }

  /**
   * As markDelivered(), on the worker thread when there is one: a mark rewrites every row it
   * marks, milliseconds for a batch during a flush that the event loop spends on PUBACKs instead.
   * Resolves once committed; rejects with a StoreError (the records are then still waiting).
   */
  async markDeliveredSoon(seqs: readonly number[], at: number): Promise<void> {
    const worker = this.worker;
    if (!worker) return this.markDelivered(seqs, at);
    if (seqs.length === 0) return;
    this.ensureFile('marking records delivered');
    let changed: number;
    try {
      changed = await worker.deliver(runs(seqs), at);
    } catch (err) {
      throw this.failed(err, 'marking records delivered');
    }
    if (changed > 0) this.changes += 1;
    this.succeeded();
    this.emit('delivered', changed);
  }

  /**
   * Sets a record aside: the broker refuses it (or drops the connection each time it is sent).
   * It stays waiting, counted as parked, and is retried by parkRetryDelayMs; the rest flows.
   * Returns when it will be retried.
   */
  park(seq: number, reason: string, now: number): number {
    const count = (this.guard('reading a record', () => this.stmt.parkCount.get(seq)) as number | undefined) ?? 0;
    const retryAt = now + parkRetryDelayMs(count + 1);
    this.guard('parking a record', () =>
      (this.db as Database.Database)
        .transaction(() => {
          if (this.stmt.park.run({ seq, now, reason: reason.slice(0, 500), retryAt }).changes > 0) this.stmt.count.run(1, 'parked');
        })
        .immediate(),
    );
    this.committed();
    return retryAt;
  }

  /** Parked records whose retry time has come go back to waiting; returns how many. */
  unparkDue(now: number): number {
    let n = 0;
    this.guard('retrying parked records', () =>
      (this.db as Database.Database)
        .transaction(() => {
          n = this.stmt.unparkDue.run(now).changes;
          if (n > 0) this.stmt.count.run(-n, 'parked');
        })
        .immediate(),
    );
    if (n > 0) {
      this.committed();
      this.emit('inserted', n);
    }
    return n;
  }

  /** Makes every parked record due now (an operator's "try them again"); returns how many. */
  retryParkedNow(now: number): number {
    const n = this.guard('retrying parked records', () => this.stmt.retryAllParked.run(now).changes);
    return n > 0 ? this.unparkDue(now) : 0;
  }

  /** When the next parked record is due, or null when none is parked. */
  nextParkRetry(): number | null {
    return this.guard('reading parked records', () => (this.stmt.nextRetry.get() as number | null) ?? null);
  }

  parked(limit = 100): ParkedRecord[] {
    return this.guard('reading parked records', () => this.stmt.parked.all(limit) as ParkedRecord[]);
  }

  /** O(1) at any backlog: counters kept with the rows, and the oldest waiting by the seq index. */
  stats(): OutboxStats {
    if (!this.db) return { pending: 0, oldestPendingAt: null, parked: 0, delivered: 0, lastDeliveryAt: null };
    return this.guard('reading the backlog', () => {
      const c = Object.fromEntries((this.stmt.counters.all() as { name: string; value: number }[]).map((r) => [r.name, r.value]));
      const pendingOldest = (this.stmt.oldestPending.get() as number | undefined) ?? null;
      const parked = c['parked'] ?? 0;
      const parkedOldest = parked > 0 ? ((this.stmt.oldestParked.get() as number | null) ?? null) : null;
      const oldest = pendingOldest === null ? parkedOldest : parkedOldest === null ? pendingOldest : Math.min(pendingOldest, parkedOldest);
      return {
        pending: c['pending'] ?? 0,
        oldestPendingAt: oldest,
        parked,
        delivered: c['delivered'] ?? 0,
        lastDeliveryAt: c['last_delivery_at'] ? (c['last_delivery_at'] as number) : null,
      };
    });
  }

  /** Deletes at most `limit` delivered records older than `before`; undelivered records never. */
  pruneBatch(before: number, limit: number): number {
    let n = 0;
    this.guard('pruning delivered records', () =>
      (this.db as Database.Database)
        .transaction(() => {
          n = this.stmt.pruneBatch.run(before, limit).changes;
          if (n > 0) this.stmt.count.run(-n, 'delivered');
        })
        .immediate(),
    );
    // Nothing deleted, nothing written: the worker thread is not woken for it.
    if (n > 0) this.committed();
    else this.succeeded();
    return n;
  }

  getState(key: string): string | undefined {
    return this.guard('reading state', () => this.stmt.getState.get(key) as string | undefined);
  }

  /** Writes only when the value differs. */
  setState(key: string, value: string): void {
    if (this.getState(key) === value) return;
    this.ensureFile(`saving ${key}`);
    this.guard(`saving ${key}`, () => this.stmt.setState.run(key, value));
    this.committed();
  }

  /** Null while writes succeed, else why the last one failed. */
  get failure(): string | null {
    return this.writeFailure;
  }

  private failed(err: unknown, doing: string): StoreError {
    const e = storeError(err, doing);
    // A lock held elsewhere is reported (health, webhooks 503) only when it outlasts a moment: the
    // store thread's commit holds it for milliseconds, an SD card's slow fsync for tens.
    if (e.code === 'STORE_LOCKED') {
      const now = performance.now();
      this.lockedSince ??= now;
      if (now - this.lockedSince < (this.opts.lockReportAfterMs ?? LOCK_REPORT_AFTER_MS)) return e;
    }
    this.reportFailure(e.code, e.message);
    return e;
  }

  /** Reported once per kind of failure: a damaged file fails every use, each "while" something else. */
  private reportFailure(code: StoreErrorCode, message: string): void {
    this.writeFailure = message;
    if (this.failureCode === code) return;
    this.failureCode = code;
    this.emit('writable', false, message);
  }

  /** After every successful write: the checkpointer learns the WAL grew. */
  private committed(): void {
    this.changes += 1;
    this.worker?.written();
    this.succeeded();
  }

  private succeeded(): void {
    this.lockedSince = null;
    if (this.writeFailure === null) return;
    this.writeFailure = null;
    this.failureCode = null;
    this.emit('writable', true, 'writable');
  }

  integrityCheck(): string {
    return (this.db as Database.Database).pragma('integrity_check', { simple: true }) as string;
  }

  close(): void {
    this.worker?.stop();
    this.worker = null;
    const db = this.db;
    this.db = null;
    this.statements = null;
    this.identity = null;
    if (db?.open) db.close();
  }
}

/** Counters from the rows themselves (after a recovery). */
function recount(db: Database.Database): void {
  const set = db.prepare('UPDATE counters SET value = ? WHERE name = ?');
  const one = (sql: string): number => (db.prepare(sql).pluck().get() as number | null) ?? 0;
  set.run(one('SELECT COUNT(*) FROM transactions WHERE delivered_at IS NULL'), 'pending');
  set.run(one('SELECT COUNT(*) FROM transactions WHERE delivered_at IS NULL AND parked_at IS NOT NULL'), 'parked');
  set.run(one('SELECT COUNT(*) FROM transactions WHERE delivered_at IS NOT NULL'), 'delivered');
  set.run(one('SELECT COALESCE(MAX(delivered_at), 0) FROM transactions'), 'last_delivery_at');
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

/** Whether a stored record's text is what was stored: its checksum, or (older rows) that it is a JSON object. */
export function recordIntact(rec: StoredRecord): boolean {
  if (rec.crc !== null && rec.crc !== undefined) return crc32(rec.record) === rec.crc;
  try {
    const v: unknown = JSON.parse(rec.record);
    return typeof v === 'object' && v !== null && !Array.isArray(v);
  } catch {
    return false;
  }
}
