import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { CommitRow, WriterFailure, WriterReply, WriterRequest, WriterSettings } from './writer-protocol.js';

export type { CommitRow } from './writer-protocol.js';

/**
 * The writer thread's entry: beside the bundle's main.js (the bundle's chunks are one folder
 * down), beside this module (tsc's layout), or this module's TypeScript source, which Node runs
 * with its type stripping (the test runner's layout).
 */
function writerEntry(): string {
  for (const rel of ['../store-writer.js', './store-writer.js', './store-writer.ts']) {
    const file = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(file)) return file;
  }
  throw new Error('the database writer thread (store-writer.js) is missing: npm run build');
}

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

/** A request with an id, waiting for its one reply. */
interface Waiting {
  resolve: (reply: WriterReply) => void;
  reject: (err: Error) => void;
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
    const settings: WriterSettings = {
      sqlite: createRequire(import.meta.url).resolve('better-sqlite3'),
      path: this.opts.path,
      insertSql: this.opts.insertSql,
      deliverSql: this.opts.deliverSql,
      maxPageCount: this.opts.maxPageCount ?? 0,
      minFrames: this.opts.minFrames ?? 250,
      idleCheckpointMs: this.opts.idleCheckpointMs ?? 30_000,
      periodMs: this.opts.periodMs ?? 100,
      idleMs: this.opts.idleMs ?? 60_000,
    };
    const worker = new Worker(writerEntry(), { workerData: settings });
    worker.unref();
    worker.on('message', (m: WriterReply) => this.onReply(worker, m));
    worker.on('error', (err) => this.opts.onError?.(err.message));
    worker.on('exit', () => {
      if (this.worker !== worker) return;
      this.worker = null;
      // Commits it had not answered are not known to be on disk: their callers are told so.
      for (const [id, w] of this.waiting) {
        this.waiting.delete(id);
        w.reject(new WorkerCommitError('the database writer thread ended before answering', undefined));
      }
      // It ended just as a write asked for it: that write still gets its checkpoint.
      const wasAsked = this.asked;
      this.asked = false;
      if (wasAsked) this.written();
    });
    return worker;
  }

  private onReply(worker: Worker, m: WriterReply): void {
    switch (m.type) {
      case 'committed':
      case 'delivered':
        return this.answered(m.id, m);
      case 'failed':
        return this.answered(m.id, m, m.failure);
      case 'noted':
        this.asked = false;
        // Written again while the worker was answering: those frames are told about too.
        if (this.writtenSince) {
          this.writtenSince = false;
          this.written();
        }
        return;
      case 'checkpointed':
        return this.opts.onDone?.({ log: m.log, checkpointed: m.checkpointed });
      case 'checkpoint-failed':
        return this.opts.onError?.(m.message);
      case 'idle':
        // The handshake: the thread ends only when nothing is waiting for it. It is let go at
        // once, so a request made after this goes to a new thread, never to one that is ending.
        if (this.worker !== worker || this.waiting.size > 0 || this.asked) return;
        this.worker = null;
        this.post(worker, { type: 'exit' });
        return;
    }
  }

  private answered(id: number, reply: WriterReply, failure?: WriterFailure): void {
    const w = this.waiting.get(id);
    if (!w) return;
    this.waiting.delete(id);
    if (failure) w.reject(new WorkerCommitError(failure.message, failure.code));
    else w.resolve(reply);
  }

  private post(worker: Worker, message: WriterRequest): void {
    worker.postMessage(message);
  }

  private ask(request: (id: number) => WriterRequest): Promise<WriterReply> {
    if (this.stopped) return Promise.reject(new WorkerCommitError('the database is closed', undefined));
    this.worker ??= this.spawn();
    const id = this.nextId++;
    const worker = this.worker;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.post(worker, request(id));
    });
  }

  /** Commits the rows in one transaction; resolves with each one's seq (null: already stored) once it is on disk. */
  async commit(rows: CommitRow[]): Promise<(number | null)[]> {
    const reply = await this.ask((id) => ({ type: 'commit', id, rows }));
    if (reply.type !== 'committed' || reply.seqs.length !== rows.length) throw new WorkerCommitError('the database writer thread gave no answer for the records', undefined);
    return reply.seqs;
  }

  /** Marks the seq ranges delivered at `at`, in one transaction; resolves with how many rows changed. */
  async deliver(ranges: [number, number][], at: number): Promise<number> {
    const reply = await this.ask((id) => ({ type: 'deliver', id, ranges, at }));
    return reply.type === 'delivered' ? reply.changed : 0;
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
    this.post(this.worker, { type: 'written' });
  }

  /** The database file was recreated: the worker's connection is to the old one. */
  reopen(): void {
    if (this.worker) this.post(this.worker, { type: 'reopen' });
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
    if (worker) this.post(worker, { type: 'close' });
    for (const [id, w] of this.waiting) {
      this.waiting.delete(id);
      w.reject(new WorkerCommitError('the database was closed before the commit was answered', undefined));
    }
  }
}
