import { EventEmitter } from 'node:events';
import { statSync } from 'node:fs';
import Database from 'better-sqlite3';
import { errorMessage } from '../platform/errors.js';
import { migrate } from './migrations.js';
import { failingStorage, type FailingStorage } from './failing-storage.js';
import { isSqliteError, StoreError, toStoreError, type StoreErrorCode } from './store-error.js';
import { InlineWriter } from './inline-writer.js';
import { ThreadWriter, type CheckpointerTuning } from './thread-writer.js';
import type { Writer } from './writer.js';
import { WATERMARK, type ResultOf, type WriteOp } from './writes.js';

export interface DatabaseEvents {
  /** A write failed after succeeding, or succeeded after failing. */
  writable: [ok: boolean, detail: string];
  /** The database file was deleted or replaced under the agent; this many waiting records were moved into a new one. */
  recovered: [moved: number];
  /** A background checkpoint failed (null: they work again). The WAL then grows until one succeeds or the writer checkpoints itself. */
  checkpoint: [problem: string | null];
  /** A background checkpoint ran: frames in the WAL, and how many of them are in the database file now. */
  checkpointed: [log: number, copied: number];
}

export interface DatabaseOptions {
  path: string;
  /** Caps the database size (PRAGMA max_page_count). */
  maxSizeMb?: number | undefined;
  readonly?: boolean;
  /**
   * Writes on a worker thread (the running agent), so the event loop never waits on their fsyncs
   * or on a lock. Without it they run on the caller's thread (the CLI, an in-memory database).
   */
  worker?: boolean | CheckpointerTuning;
  /** How long writes may fail on a lock held elsewhere before it is reported (default 2 s). */
  lockReportAfterMs?: number;
}

/** How long a read on the event loop's connection waits for SQLite's WAL index lock (it writes nothing). */
const MAIN_BUSY_TIMEOUT_MS = 50;
/** The page size of a database this agent creates (see openFile). */
export const NEW_DATABASE_PAGE_SIZE = 1024;
/** How long writes may fail on a lock held elsewhere before health and the log say so. */
const LOCK_REPORT_AFTER_MS = 2_000;

/**
 * The database file: opening it (pragmas, schema), watching that the file at storage.path is the
 * one open (recreating it with every waiting record when it was deleted or replaced), the writer
 * that makes every write, and how failures are reported (once per kind, `writable`).
 *
 * The event loop's connection only reads. Writes go to the writer, so none of them can hold the
 * loop on a lock another process holds or on an SD card's fsync.
 */
export class StoreDatabase extends EventEmitter<DatabaseEvents> {
  private db: Database.Database | null = null;
  private writer: Writer | null = null;
  /** Settles once the writer of the last close holds no connection (see closed()). */
  private writerEnded: Promise<void> = Promise.resolve();
  private identity: { dev: number; ino: number } | null = null;
  private maxPageCount: number | undefined;
  private writeFailure: string | null = null;
  private failureCode: StoreErrorCode | null = null;
  /** When writes began to fail on a lock held elsewhere (performance.now()), while they do. */
  private lockedSince: number | null = null;
  private checkpointProblem: string | null = null;
  private changes = 0;
  /** Prepared read statements of the current connection, by SQL. */
  private readonly statements = new Map<string, Database.Statement<unknown[], unknown>>();

  constructor(private readonly opts: DatabaseOptions) {
    super();
  }

  get path(): string {
    return this.opts.path;
  }

  get isOpen(): boolean {
    return this.db !== null;
  }

  private get inMemory(): boolean {
    return this.opts.path === ':memory:' || this.opts.path === '';
  }

  /**
   * Goes up by one with every write that changed something (and on a reopen), before its
   * events: a reader that saw the count unchanged knows nothing was written since.
   */
  get changeCount(): number {
    return this.changes;
  }

  /** Whether the writer thread is there (only while writes come). */
  get writerThreadRunning(): boolean {
    return this.writer instanceof ThreadWriter && this.writer.running;
  }

  /** Null while writes succeed, else why the last one failed. */
  get failure(): string | null {
    return this.writeFailure;
  }

  /** Opens (creating and migrating when needed). Throws STORE_OPEN_FAILED naming the path. */
  open(): void {
    if (this.db) return;
    try {
      this.db = this.openFile();
      this.changes += 1;
      this.identity = this.fileIdentity();
      if (!this.opts.readonly) this.writer = this.makeWriter(this.db);
    } catch (err) {
      this.close();
      const storage = this.inMemory ? null : failingStorage(this.opts.path);
      throw new StoreError('STORE_OPEN_FAILED', `cannot open the database ${this.opts.path}: ${storage?.summary ?? errorMessage(err)} (storage.path)`, err);
    }
  }

  private openFile(): Database.Database {
    const { opts } = this;
    const db = new Database(opts.path, { readonly: opts.readonly ?? false, fileMustExist: opts.readonly ?? false });
    try {
      db.pragma(`busy_timeout = ${MAIN_BUSY_TIMEOUT_MS}`);
      if (!opts.readonly) {
        // A new database gets 1 KiB pages (SQLite's default is 4 KiB). One webhook at a time is
        // a site's normal load, and each commit writes every page it touches whole: the table's
        // leaf, three index leaves, the sequence and the counters. With 4 KiB pages that was
        // about 30 KB written per record, twice what a plain one-table receiver writes; with 1 KiB
        // pages it is under it (docs/BENCHMARKS.md), and an SD card wears by what is written.
        // The size is fixed when the first table is made: a database made by an earlier release
        // keeps its 4 KiB pages and works as before.
        if (isEmpty(db)) db.pragma(`page_size = ${NEW_DATABASE_PAGE_SIZE}`);
        db.pragma('journal_mode = WAL');
        // Opening and migrating are this connection's only writes (and a recovery's copy).
        db.pragma('synchronous = FULL');
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

  private makeWriter(db: Database.Database): Writer {
    if (!this.opts.worker || this.inMemory) return new InlineWriter({ main: db, path: this.opts.path, inMemory: this.inMemory, maxPageCount: this.maxPageCount });
    const tuning = typeof this.opts.worker === 'object' ? this.opts.worker : {};
    return new ThreadWriter({
      ...tuning,
      path: this.opts.path,
      maxPageCount: this.maxPageCount,
      pageSize: db.pragma('page_size', { simple: true }) as number,
      onCheckpoint: (r) => {
        this.checkpointed(null);
        this.emit('checkpointed', r.log, r.checkpointed);
      },
      onCheckpointError: (problem) => this.checkpointed(problem),
    });
  }

  private checkpointed(problem: string | null): void {
    if (problem === this.checkpointProblem) return;
    this.checkpointProblem = problem;
    this.emit('checkpoint', problem);
  }

  /**
   * A prepared statement on the event loop's (reading) connection, typed by its parameters and
   * the row it selects (its column aliases are the row's fields; a plucked one, the column).
   */
  statement<P extends unknown[], R>(sql: string): Database.Statement<P, R> {
    const db = this.db;
    if (!db) throw new StoreError('STORE_FAILED', 'the database is not open');
    let s = this.statements.get(sql);
    if (!s) {
      s = db.prepare<unknown[], unknown>(sql);
      this.statements.set(sql, s);
    }
    return s as unknown as Database.Statement<P, R>;
  }

  /** Runs a read; a SQLite failure is reported (health) and thrown as a StoreError. */
  read<T>(doing: string, fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      if (err instanceof StoreError) throw err;
      if (isSqliteError(err)) throw this.failed(err, doing);
      throw err;
    }
  }

  /**
   * Makes a write on the writer (after checking the file is still the one open); resolves once it
   * is committed, rejects with a StoreError that health has been told about.
   */
  async write<W extends WriteOp>(doing: string, w: W): Promise<ResultOf<W['op']>> {
    const writer = this.writer;
    if (!writer) throw new StoreError('STORE_FAILED', this.db ? 'the database is open read-only' : 'the database is not open');
    this.ensureFile(doing);
    let result: ResultOf<W['op']>;
    try {
      result = await writer.write(w);
    } catch (err) {
      throw this.failed(err, doing);
    }
    this.succeeded();
    return result;
  }

  /** A write changed something: readers that compare changeCount look again. */
  changed(): void {
    this.changes += 1;
  }

  private fileIdentity(): { dev: number; ino: number } | null {
    if (this.inMemory || this.opts.readonly) return null;
    const st = statSync(this.opts.path);
    return { dev: st.dev, ino: st.ino };
  }

  /**
   * True while the file at storage.path is the one open. A file deleted or replaced under a
   * running agent would take every later write with it: it is recreated at the path, with every
   * waiting record (and the agent's state) moved in, before anything else is written.
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
    this.changes += 1;
    this.emit('recovered', moved);
    this.succeeded();
  }

  /** The one write of the event loop's connection after opening: a new file, which nothing else holds yet. */
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
          for (const row of old.prepare(`SELECT * FROM transactions WHERE seq > ${WATERMARK} AND delivered_at IS NULL ORDER BY seq`).iterate()) moved += copy.run(row as Record<string, unknown>).changes;
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
    this.statements.clear();
    this.identity = this.fileIdentity();
    this.writer?.reopen();
    old.close();
    return moved;
  }

  private failed(err: unknown, doing: string): StoreError {
    const e = this.onFailingStorage(toStoreError(err, doing), doing);
    // A lock held elsewhere is reported (health, webhooks 503) only when it outlasts a moment: a
    // backup's read transaction holds it for milliseconds, an SD card's slow fsync for tens.
    if (e.code === 'STORE_LOCKED') {
      const now = performance.now();
      this.lockedSince ??= now;
      if (now - this.lockedSince < (this.opts.lockReportAfterMs ?? LOCK_REPORT_AFTER_MS)) return e;
    }
    this.reportFailure(e.code, e.message);
    return e;
  }

  /**
   * SQLite says only "disk I/O error", "attempt to write a readonly database", or even "database
   * disk image is malformed" of a whole file it cannot read, when the file system under it went
   * read-only or failed: the kernel's word on it (failing-storage.ts) says which, and why.
   */
  private onFailingStorage(e: StoreError, doing: string): StoreError {
    if ((e.code !== 'STORE_FAILED' && e.code !== 'STORE_DAMAGED') || this.inMemory) return e;
    const storage = failingStorage(this.opts.path);
    // A file that reads as damaged on storage that still reads is damaged.
    if (!storage || (e.code === 'STORE_DAMAGED' && storage.fault !== 'failed')) return e;
    return storageError(storage, doing, e.cause);
  }

  /**
   * The file system looked at while nothing writes (every 30 s, a read-only open: no disk write):
   * a card that failed on an idle box is reported before the next customer pays, and cleared
   * once it works again.
   */
  checkFileSystem(doing: string): void {
    if (this.inMemory || this.opts.readonly || !this.db) return;
    const storage = failingStorage(this.opts.path);
    if (storage) {
      const e = storageError(storage, doing);
      this.reportFailure(e.code, e.message);
    } else if (this.failureCode === 'STORE_READONLY' || this.failureCode === 'STORE_DISK_FAILED') this.succeeded();
  }

  /** Reported once per kind of failure: a damaged file fails every use, each "while" something else. */
  private reportFailure(code: StoreErrorCode, message: string): void {
    this.writeFailure = message;
    if (this.failureCode === code) return;
    this.failureCode = code;
    this.emit('writable', false, message);
  }

  private succeeded(): void {
    this.lockedSince = null;
    if (this.writeFailure === null) return;
    this.writeFailure = null;
    this.failureCode = null;
    this.emit('writable', true, 'writable');
  }

  integrityCheck(): string {
    if (!this.db) throw new StoreError('STORE_FAILED', 'the database is not open');
    return this.db.pragma('integrity_check', { simple: true }) as string;
  }

  /**
   * Resolves once every connection of the last close() is closed, the writer thread's included.
   * The last connection to close copies the WAL into the database file and removes it, so only
   * then is a stopped agent's database one whole file (a backup, `sqlite3 agent.db`).
   */
  closed(): Promise<void> {
    return this.writerEnded;
  }

  close(): void {
    this.writer?.close();
    this.writerEnded = this.writer?.ended() ?? this.writerEnded;
    this.writer = null;
    const db = this.db;
    this.db = null;
    this.statements.clear();
    this.identity = null;
    if (db?.open) db.close();
  }
}

/** No schema yet: the file was just created (or is empty). */
function isEmpty(db: Database.Database): boolean {
  return db.prepare('SELECT COUNT(*) FROM sqlite_schema').pluck().get() === 0;
}

/** Counters from the rows themselves (after a recovery). */
function recount(db: Database.Database): void {
  const set = db.prepare('UPDATE counters SET value = ? WHERE name = ?');
  const one = (sql: string): number => (db.prepare(sql).pluck().get() as number | null) ?? 0;
  set.run(one(`SELECT COUNT(*) FROM transactions WHERE seq > ${WATERMARK} AND delivered_at IS NULL`), 'pending');
  set.run(one('SELECT COUNT(*) FROM transactions WHERE delivered_at IS NULL AND parked_at IS NOT NULL'), 'parked');
  set.run(one(`SELECT COUNT(*) FROM transactions WHERE seq <= ${WATERMARK} OR delivered_at IS NOT NULL`), 'delivered');
  set.run(one('SELECT max(COALESCE((SELECT MAX(delivered_at) FROM transactions), 0), COALESCE((SELECT MAX(at) FROM delivered_through), 0))'), 'last_delivery_at');
}

function storageError(storage: FailingStorage, doing: string, cause?: unknown): StoreError {
  return new StoreError(storage.fault === 'failed' ? 'STORE_DISK_FAILED' : 'STORE_READONLY', `${storage.summary}, while ${doing}`, cause);
}
