import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * The worker's code (CommonJS, evaluated): its own connection to the database, and a PASSIVE
 * checkpoint when the WAL holds `minFrames` frames not yet in the database file (what SQLite's
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
// A lower CPU priority for this thread only (Linux: a thread id is a valid setpriority target):
// copying pages yields a contended core to the event loop.
try {
  const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').pop());
  if (tid > 0) os.setPriority(tid, 10);
} catch {}
const le = os.endianness() === 'LE';
const header = Buffer.alloc(100);
let db = null;
let shm = null;
let last = 0;
let timer = null;
let later = null;
let idle = null;
const close = () => {
  if (db && db.open) db.close();
  db = null;
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
    if (!db) db = new Database(workerData.path, { fileMustExist: true });
    const [row] = db.pragma('wal_checkpoint(PASSIVE)');
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

/**
 * WAL checkpoints on a worker thread. A checkpoint copies pages into the database file and
 * fsyncs it twice; on the writer's connection it runs inside a commit, on the event loop, and a
 * stalled fsync (an SD card under load) blocks everything else for its duration. Here the event
 * loop only posts "written" after a commit (once until the worker answers).
 */
export class Checkpointer {
  private worker: Worker | null = null;
  private asked = false;
  private stopped = false;

  constructor(private readonly opts: CheckpointerOptions) {}

  private spawn(): Worker {
    const sqlite = createRequire(import.meta.url).resolve('better-sqlite3');
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: {
        sqlite,
        path: this.opts.path,
        minFrames: this.opts.minFrames ?? 250,
        idleCheckpointMs: this.opts.idleCheckpointMs ?? 30_000,
        periodMs: this.opts.periodMs ?? 100,
        idleMs: this.opts.idleMs ?? 60_000,
      },
    });
    worker.unref();
    worker.on('message', (m: { done?: CheckpointResult; error?: string }) => {
      this.asked = false;
      if (m.error !== undefined) this.opts.onError?.(m.error);
      else if (m.done) this.opts.onDone?.(m.done);
    });
    worker.on('error', (err) => this.opts.onError?.(err.message));
    worker.on('exit', () => {
      if (this.worker !== worker) return;
      this.worker = null;
      // It ended (idle) just as a write asked for it: that write still gets its checkpoint.
      const wasAsked = this.asked;
      this.asked = false;
      if (wasAsked) this.written();
    });
    return worker;
  }

  /** A commit added frames to the WAL. */
  written(): void {
    if (this.stopped || this.asked) return;
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

  /** Closes the worker's connection and lets the thread end (it never holds the process). */
  stop(): void {
    this.stopped = true;
    const worker = this.worker;
    this.worker = null;
    this.asked = false;
    worker?.postMessage('close');
  }
}
