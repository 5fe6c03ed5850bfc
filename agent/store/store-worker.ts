import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * The worker's code (CommonJS, evaluated): its own connection to the database; the webhook's group
 * commits (one transaction per batch, synchronous=FULL, answered with each record's seq); the
 * publisher's delivered marks (synchronous=NORMAL: an update as large as the records it marks); and a
 * PASSIVE checkpoint when the WAL holds `minFrames` frames not yet in the database file (what SQLite's
 * wal_autocheckpoint would do inside a commit), at most once per `periodMs`; fewer are copied
 * `idleCheckpointMs` after the write, so a quiet box's WAL is folded in once rather than per
 * record. A PASSIVE checkpoint never blocks the writer; what it cannot copy yet is copied by the
 * next one. After `idleMs` without writes the thread ends: an idle agent carries no second isolate.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
const os = require('node:os');
const Database = require(workerData.sqlite);
const le = os.endianness() === 'LE';
const header = Buffer.alloc(100);
let db = null;
let shm = null;
let last = 0;
let timer = null;
let later = null;
let idle = null;
let insert = null;
let count = null;
const connect = () => {
  if (db) return db;
  db = new Database(workerData.path, { fileMustExist: true });
  // Off the event loop, but a webhook waits on it: fail within 2 s (503, Retry-After) rather
  // than queue batch after batch behind another process's lock until the request times out.
  db.pragma('busy_timeout = 2000');
  db.pragma('synchronous = FULL');
  if (workerData.maxPageCount) db.pragma('max_page_count = ' + workerData.maxPageCount);
  return db;
};
// One transaction for a batch of new records; for each, its seq, or null when already stored.
const commit = (m) => {
  try {
    const d = connect();
    insert ??= d.prepare(workerData.insertSql);
    count ??= d.prepare("UPDATE counters SET value = value + ? WHERE name = 'pending'");
    const seqs = [];
    d.transaction(() => {
      seqs.length = 0;
      let n = 0;
      for (const row of m.rows) {
        const r = insert.get(row);
        seqs.push(r ? r.seq : null);
        if (r) n++;
      }
      if (n > 0) count.run(n);
    }).immediate();
    parentPort.postMessage({ id: m.id, seqs });
  } catch (err) {
    if (!(err && err.code && String(err.code).startsWith('SQLITE_'))) close();
    parentPort.postMessage({ id: m.id, fail: { code: err && err.code, message: String(err && err.message || err) } });
  }
};
// Records whose PUBACK came, marked in one transaction without an fsync of its own
// (synchronous=NORMAL: lost to a power cut, they are only sent again); answered with how many.
let mark = null;
const deliver = (m) => {
  try {
    const d = connect();
    mark ??= {
      run: d.prepare(workerData.deliverSql),
      count: d.prepare('UPDATE counters SET value = value + ? WHERE name = ?'),
      set: d.prepare('UPDATE counters SET value = ? WHERE name = ?'),
      normal: d.prepare('PRAGMA synchronous = NORMAL'),
      full: d.prepare('PRAGMA synchronous = FULL'),
    };
    let changed = 0;
    mark.normal.run();
    try {
      d.transaction(() => {
        changed = 0;
        for (const [first, last] of m.deliver) changed += mark.run.run(m.at, first, last).changes;
        if (changed > 0) {
          mark.count.run(-changed, 'pending');
          mark.count.run(changed, 'delivered');
          mark.set.run(m.at, 'last_delivery_at');
        }
      }).immediate();
    } finally {
      if (d.open) mark.full.run();
    }
    parentPort.postMessage({ id: m.id, changed });
  } catch (err) {
    if (!(err && err.code && String(err.code).startsWith('SQLITE_'))) close();
    parentPort.postMessage({ id: m.id, fail: { code: err && err.code, message: String(err && err.message || err) } });
  }
};
const close = () => {
  if (db && db.open) db.close();
  db = null;
  insert = count = mark = null;
  if (shm !== null) try { fs.closeSync(shm); } catch {}
  shm = null;
};
const end = () => { for (const t of [timer, later, idle]) if (t) clearTimeout(t); close(); parentPort.close(); };
// Frames in the WAL not yet copied: mxFrame (offset 16) less nBackfill (offset 96) of the
// wal-index header, native byte order (sqlite.org/walformat.html). Unreadable: assume many.
const uncopied = () => {
  try {
    if (shm === null) shm = fs.openSync(workerData.path + '-shm', 'r');
    if (fs.readSync(shm, header, 0, 100, 0) < 100) return Infinity;
    const mx = le ? header.readUInt32LE(16) : header.readUInt32BE(16);
    const done = le ? header.readUInt32LE(96) : header.readUInt32BE(96);
    return mx - done;
  } catch { return Infinity; }
};
const checkpoint = () => {
  timer = null;
  if (later) { clearTimeout(later); later = null; }
  try {
    const [row] = connect().pragma('wal_checkpoint(PASSIVE)');
    last = Date.now();
    parentPort.postMessage({ done: row });
  } catch (err) {
    close();
    parentPort.postMessage({ error: String(err && err.message || err) });
  }
};
parentPort.on('message', (m) => {
  if (m === 'close') return end();
  if (m === 'reopen') return close();
  if (idle) clearTimeout(idle);
  idle = setTimeout(end, workerData.idleMs);
  if (m !== 'written') {
    if (m.deliver) deliver(m);
    else commit(m);
    if (timer || uncopied() < workerData.minFrames) return;
    return checkpoint();
  }
  if (timer) return parentPort.postMessage({});
  if (uncopied() < workerData.minFrames) {
    later ??= setTimeout(checkpoint, workerData.idleCheckpointMs);
    return parentPort.postMessage({});
  }
  const wait = last + workerData.periodMs - Date.now();
  if (wait <= 0) checkpoint();
  else { timer = setTimeout(checkpoint, wait); parentPort.postMessage({}); }
});
`;

export interface CheckpointResult {
  /** Frames in the WAL, and how many of them are now in the database file. */
  log: number;
  checkpointed: number;
}

export interface CheckpointerOptions extends CheckpointerTuning {
  path: string;
  onDone?: (result: CheckpointResult) => void;
  onError?: (message: string) => void;
}

export interface CheckpointerTuning {
  /** Checkpoint once the WAL holds this many frames (pages) not yet in the database file. */
  minFrames?: number;
  /** Fewer than minFrames are checkpointed this long after the write that added them. */
  idleCheckpointMs?: number;
  /** At most one checkpoint per this many ms while writes come (the WAL grows meanwhile). */
  periodMs?: number;
  /** The thread ends after this long without writes, and starts again with the next. */
  idleMs?: number;
}

/** A record to commit, as the outbox stores it (text, checksum and start request made on the event loop). */
export interface CommitRow {
  transactionId: string;
  status: string;
  deviceId: string;
  record: string;
  source: string;
  receivedAt: number;
  crc: number;
  startRequest: string | null;
}

/** A commit the worker could not make: the SQLite code (SQLITE_FULL, ...) and message. */
export class WorkerCommitError extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
  ) {
    super(message);
    this.name = 'WorkerCommitError';
  }
}

export interface StoreWorkerOptions extends CheckpointerOptions {
  /** The INSERT ... RETURNING seq statement the outbox uses. */
  insertSql: string;
  /** The UPDATE that marks a range of seqs delivered: (at, first, last). */
  deliverSql: string;
  /** PRAGMA max_page_count (storage.maxSizeMb); it is per connection. */
  maxPageCount?: number | undefined;
}

interface Waiting {
  resolve: (answer: WorkerAnswer) => void;
  reject: (err: Error) => void;
}

/** What the worker answers a commit (each record's seq) or a delivered mark (rows changed). */
interface WorkerAnswer {
  seqs?: (number | null)[];
  changed?: number;
}

/**
 * The database's second connection, on a worker thread, for the writes that wait on the disk.
 * Commits of new records (the webhook's group commits) are made there, so the event loop serves
 * requests, PUBACKs and buttons while the fsync runs (milliseconds on an SD card); and WAL
 * checkpoints (a copy and two fsyncs), which on the writer's connection run inside a commit. The
 * event loop posts "written" after its own commits (once until the worker answers).
 */
export class StoreWorker {
  private worker: Worker | null = null;
  private asked = false;
  private writtenSince = false;
  private stopped = false;
  private nextId = 1;
  private readonly waiting = new Map<number, Waiting>();

  constructor(private readonly opts: StoreWorkerOptions) {}

  private spawn(): Worker {
    const sqlite = createRequire(import.meta.url).resolve('better-sqlite3');
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: {
        sqlite,
        path: this.opts.path,
        insertSql: this.opts.insertSql,
        deliverSql: this.opts.deliverSql,
        maxPageCount: this.opts.maxPageCount ?? 0,
        minFrames: this.opts.minFrames ?? 250,
        idleCheckpointMs: this.opts.idleCheckpointMs ?? 30_000,
        periodMs: this.opts.periodMs ?? 100,
        idleMs: this.opts.idleMs ?? 60_000,
      },
    });
    worker.unref();
    worker.on('message', (m: WorkerAnswer & { id?: number; fail?: { code?: string; message: string }; done?: CheckpointResult; error?: string }) => {
      if (m.id !== undefined) return this.answered(m.id, m, m.fail);
      this.asked = false;
      // Written again while the worker was answering: those frames are told about too.
      if (this.writtenSince) {
        this.writtenSince = false;
        this.written();
      }
      if (m.error !== undefined) this.opts.onError?.(m.error);
      else if (m.done) this.opts.onDone?.(m.done);
    });
    worker.on('error', (err) => this.opts.onError?.(err.message));
    worker.on('exit', () => {
      if (this.worker !== worker) return;
      this.worker = null;
      // Commits it had not answered are not known to be on disk: their callers are told so.
      for (const [id, w] of this.waiting) {
        this.waiting.delete(id);
        w.reject(new WorkerCommitError('the database writer thread ended before answering', undefined));
      }
      // It ended (idle) just as a write asked for it: that write still gets its checkpoint.
      const wasAsked = this.asked;
      this.asked = false;
      if (wasAsked) this.written();
    });
    return worker;
  }

  private answered(id: number, answer: WorkerAnswer, fail: { code?: string; message: string } | undefined): void {
    const w = this.waiting.get(id);
    if (!w) return;
    this.waiting.delete(id);
    if (fail) w.reject(new WorkerCommitError(fail.message, fail.code));
    else w.resolve(answer);
  }

  private ask(message: object): Promise<WorkerAnswer> {
    if (this.stopped) return Promise.reject(new WorkerCommitError('the database is closed', undefined));
    this.worker ??= this.spawn();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      (this.worker as Worker).postMessage({ ...message, id });
    });
  }

  /** Commits the rows in one transaction; resolves with each one's seq (null: already stored) once it is on disk. */
  async commit(rows: CommitRow[]): Promise<(number | null)[]> {
    const { seqs } = await this.ask({ rows });
    if (seqs?.length !== rows.length) throw new WorkerCommitError('the database writer thread gave no answer for the records', undefined);
    return seqs;
  }

  /** Marks the seq ranges delivered at `at`, in one transaction; resolves with how many rows changed. */
  async deliver(ranges: [number, number][], at: number): Promise<number> {
    return (await this.ask({ deliver: ranges, at })).changed ?? 0;
  }

  /** A commit on the event loop's connection added frames to the WAL. */
  written(): void {
    if (this.stopped) return;
    if (this.asked) {
      this.writtenSince = true;
      return;
    }
    this.worker ??= this.spawn();
    this.asked = true;
    this.worker.postMessage('written');
  }

  /** The database file was recreated: the worker's connection is to the old one. */
  reopen(): void {
    this.worker?.postMessage('reopen');
    this.asked = false;
  }

  /** Whether the thread is there (it is only while writes come). */
  get running(): boolean {
    return this.worker !== null;
  }

  /** Commits not yet answered. */
  get pendingCommits(): number {
    return this.waiting.size;
  }

  /** Closes the worker's connection and lets the thread end (it never holds the process). */
  stop(): void {
    this.stopped = true;
    const worker = this.worker;
    this.worker = null;
    this.asked = false;
    worker?.postMessage('close');
    for (const [id, w] of this.waiting) {
      this.waiting.delete(id);
      w.reject(new WorkerCommitError('the database was closed before the commit was answered', undefined));
    }
  }
}
