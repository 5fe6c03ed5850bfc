import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { WriteFailed, type Writer } from './writer.js';
import type { WriterFailure, WriterReply, WriterRequest, WriterSettings } from './writer-protocol.js';
import type { ResultOf, WriteOp, WriteResult } from './writes.js';

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

/**
 * The WAL is copied into the database file once this much of it waits: SQLite's own default
 * (1000 pages of 4 KiB). Each checkpoint costs two fsyncs on the writer thread, where commits
 * wait behind it, and copies the hot pages (counters, the tables' right edges) once however often
 * they changed: with one webhook at a time on an SD card, checkpoints every 1 MiB (the old 250
 * frames) made commits wait on them ten times as often as the peer's, and wrote more.
 */
const CHECKPOINT_BYTES = 4 * 1024 * 1024;

/**
 * The thread ends after this long without a write. A site's webhooks further apart than this
 * each start a new thread (its boot, and SQLite's sync of the directory at the new connection's
 * first sync of the WAL); a thread kept for ten minutes instead left the bench's idle agent, which
 * writes once at its first start, with 13 MB more RssAnon (docs/ARCHITECTURE.md, "One webhook at
 * a site's pace").
 */
const IDLE_MS = 60_000;

export interface CheckpointResult {
  /** Frames in the WAL, and how many of them are now in the database file. */
  log: number;
  checkpointed: number;
}

export interface CheckpointerTuning {
  /** Checkpoint once the WAL holds this many frames (pages) not yet in the database file (default: 4 MiB of them). */
  minFrames?: number;
  /** At most one checkpoint per this many ms while writes come (the WAL grows meanwhile). */
  periodMs?: number;
  /** The thread ends after this long without writes, and starts again with the next (default: a minute). */
  idleMs?: number;
  /** How long a write waits for a lock another process holds before it fails (STORE_LOCKED). */
  busyTimeoutMs?: number;
}

export interface ThreadWriterOptions extends CheckpointerTuning {
  path: string;
  /** PRAGMA max_page_count (storage.maxSizeMb); it is per connection. */
  maxPageCount?: number | undefined;
  /** The database's page size: the default checkpoint threshold is counted in bytes. */
  pageSize: number;
  onCheckpoint?: (result: CheckpointResult) => void;
  onCheckpointError?: (message: string) => void;
}

/** A write with an id, waiting for its one reply. */
interface Waiting {
  resolve: (result: WriteResult) => void;
  reject: (err: Error) => void;
}

/**
 * The outbox's writes on a worker thread (store-writer.ts) with connections of its own, so the
 * event loop serves requests, PUBACKs and buttons while an fsync runs (milliseconds on an SD
 * card) or another process holds the lock, and WAL checkpoints (a copy and two fsyncs) run there
 * too. The thread starts with the first write and ends after a quiet spell.
 */
export class ThreadWriter implements Writer {
  private worker: Worker | null = null;
  private stopped = false;
  private nextId = 1;
  private readonly waiting = new Map<number, Waiting>();
  /** Threads not yet ended: the current one, and those told to end that are closing their connections. */
  private readonly live = new Set<Worker>();
  private readonly onEnded: (() => void)[] = [];

  constructor(private readonly opts: ThreadWriterOptions) {}

  private spawn(): Worker {
    const settings: WriterSettings = {
      sqlite: createRequire(import.meta.url).resolve('better-sqlite3'),
      path: this.opts.path,
      maxPageCount: this.opts.maxPageCount ?? 0,
      minFrames: this.opts.minFrames ?? Math.ceil(CHECKPOINT_BYTES / this.opts.pageSize),
      periodMs: this.opts.periodMs ?? 100,
      idleMs: this.opts.idleMs ?? IDLE_MS,
      busyTimeoutMs: this.opts.busyTimeoutMs ?? 2_000,
    };
    const worker = new Worker(writerEntry(), { workerData: settings });
    worker.unref();
    worker.on('message', (m: WriterReply) => this.onReply(worker, m));
    worker.on('error', (err) => this.opts.onCheckpointError?.(err.message));
    this.live.add(worker);
    worker.on('exit', () => {
      this.live.delete(worker);
      if (this.live.size === 0) for (const resolve of this.onEnded.splice(0)) resolve();
      if (this.worker !== worker) return;
      this.worker = null;
      // Writes it had not answered are not known to be committed: their callers are told so.
      this.rejectAll('the database writer thread ended before answering');
    });
    return worker;
  }

  private onReply(worker: Worker, m: WriterReply): void {
    switch (m.type) {
      case 'done':
        return this.answered(m.id, m.result);
      case 'failed':
        return this.answered(m.id, undefined, m.failure);
      case 'checkpointed':
        return this.opts.onCheckpoint?.({ log: m.log, checkpointed: m.checkpointed });
      case 'checkpoint-failed':
        return this.opts.onCheckpointError?.(m.message);
      case 'idle':
        // The handshake: the thread ends only when nothing is waiting for it. It is let go at
        // once, so a write asked for after this goes to a new thread, never to one that is ending.
        if (this.worker !== worker || this.waiting.size > 0) return;
        this.worker = null;
        this.post(worker, { type: 'exit' });
        return;
    }
  }

  private answered(id: number, result: WriteResult | undefined, failure?: WriterFailure): void {
    const w = this.waiting.get(id);
    if (!w) return;
    this.waiting.delete(id);
    if (failure || !result) w.reject(new WriteFailed(failure?.message ?? 'no answer', failure?.code));
    else w.resolve(result);
  }

  private post(worker: Worker, message: WriterRequest): void {
    worker.postMessage(message);
  }

  private rejectAll(why: string): void {
    for (const [id, w] of this.waiting) {
      this.waiting.delete(id);
      w.reject(new WriteFailed(why, undefined));
    }
  }

  write<W extends WriteOp>(write: W): Promise<ResultOf<W['op']>> {
    if (this.stopped) return Promise.reject(new WriteFailed('the database is closed', undefined));
    this.worker ??= this.spawn();
    const id = this.nextId++;
    const worker = this.worker;
    return new Promise<WriteResult>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.post(worker, { type: 'write', id, write });
    }).then((result) => {
      if (result.op !== write.op) throw new WriteFailed(`the writer thread answered ${result.op} to ${write.op}`, undefined);
      return result as ResultOf<W['op']>;
    });
  }

  reopen(): void {
    if (this.worker) this.post(this.worker, { type: 'reopen' });
  }

  /** Whether the thread is there (it is only while writes come). */
  get running(): boolean {
    return this.worker !== null;
  }

  /** Writes not yet answered. */
  get pendingWrites(): number {
    return this.waiting.size;
  }

  ended(): Promise<void> {
    return this.live.size === 0 ? Promise.resolve() : new Promise((resolve) => this.onEnded.push(resolve));
  }

  /** Closes the thread's connections and lets it end (it never holds the process). */
  close(): void {
    this.stopped = true;
    const worker = this.worker;
    this.worker = null;
    if (worker) this.post(worker, { type: 'close' });
    this.rejectAll('the database was closed before the write was answered');
  }
}
