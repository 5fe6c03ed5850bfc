// The outbox's writer thread (a worker_threads entry; started by thread-writer.ts). It makes
// every write of the running agent on its own two connections (writes.ts: durable and lazy), so
// the event loop never waits on an fsync or on a lock: the webhook's group commits, delivered
// marks, parks, prunes and state. After a write it runs a PASSIVE checkpoint when the WAL holds
// `minFrames` frames not yet in the database file (what SQLite's wal_autocheckpoint would do
// inside a commit), at most once per `periodMs`, and never for fewer: a checkpoint after a quiet
// spell would copy a lone record's pages (two fsyncs: the WAL and the file) and make the next
// commit restart the WAL (a third, for its header), at a site's pace three fsyncs per record
// beside the commit's own. A PASSIVE checkpoint never
// blocks a writer; what it cannot copy yet, the next copies. After `idleMs` without requests it
// asks to end (`idle`) and ends when the main side agrees.
//
// Imports of the agent's modules carry .ts: Node runs this file as it is under the test runner
// (type stripping), and tsc and esbuild rewrite them for the build.
import { closeSync, openSync, readSync } from 'node:fs';
import { createRequire } from 'node:module';
import { endianness } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import type BetterSqlite3 from 'better-sqlite3';
import type { WriterReply, WriterRequest, WriterSettings } from './writer-protocol.ts';
import { Writes, type WriteOp } from './writes.ts';

type Database = BetterSqlite3.Database;

const settings = workerData as WriterSettings;
const port = parentPort as NonNullable<typeof parentPort>;
const DatabaseCtor = createRequire(import.meta.url)(settings.sqlite) as typeof BetterSqlite3;
const littleEndian = endianness() === 'LE';
const header = Buffer.alloc(100);
/** With checkpoints made here, SQLite's own inside a commit is only a backstop: four times ours, 16 MiB at the default. */
const FALLBACK_CHECKPOINT_PAGES = Math.max(4000, 4 * settings.minFrames);

let connections: { durable: Database; lazy: Database; writes: Writes } | null = null;
let shm: number | null = null;
/** When the last checkpoint ran, on the monotonic clock: NTP stepping the wall clock back must not stall them. */
let lastCheckpoint = -Infinity;
let checkpointTimer: NodeJS.Timeout | null = null;
let idleTimer: NodeJS.Timeout | null = null;

const reply = (message: WriterReply): void => port.postMessage(message);

function open(synchronous: 'FULL' | 'NORMAL'): Database {
  const db = new DatabaseCtor(settings.path, { fileMustExist: true });
  // Off the event loop, but a webhook waits on it: fail within 2 s (503, Retry-After) rather
  // than queue batch after batch behind another process's lock until the request times out.
  db.pragma(`busy_timeout = ${settings.busyTimeoutMs}`);
  db.pragma(`synchronous = ${synchronous}`);
  db.pragma(`wal_autocheckpoint = ${FALLBACK_CHECKPOINT_PAGES}`);
  if (settings.maxPageCount) db.pragma(`max_page_count = ${settings.maxPageCount}`);
  return db;
}

function connect(): { durable: Database; lazy: Database; writes: Writes } {
  if (connections) return connections;
  const durable = open('FULL');
  let lazy: Database;
  try {
    lazy = open('NORMAL');
  } catch (err) {
    durable.close();
    throw err;
  }
  connections = { durable, lazy, writes: new Writes({ durable, lazy }) };
  return connections;
}

function closeConnections(): void {
  for (const db of connections ? [connections.durable, connections.lazy] : []) if (db.open) db.close();
  connections = null;
  if (shm !== null) {
    try {
      closeSync(shm);
    } catch {
      // already gone
    }
  }
  shm = null;
}

const sqliteCode = (err: unknown): string | undefined => {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
};

function write(id: number, w: WriteOp): void {
  try {
    reply({ type: 'done', id, result: connect().writes.run(w) });
  } catch (err) {
    const code = sqliteCode(err);
    // A failure that is not SQLite's own (the file went away...) drops the connections: the next write opens them again.
    if (!code?.startsWith('SQLITE_')) closeConnections();
    reply({ type: 'failed', id, failure: { code, message: err instanceof Error ? err.message : String(err) } });
  }
}

/**
 * Frames in the WAL not yet copied: mxFrame (offset 16) less nBackfill (offset 96) of the
 * wal-index header, native byte order (sqlite.org/walformat.html). Unreadable: assume many.
 */
function uncopied(): number {
  try {
    shm ??= openSync(`${settings.path}-shm`, 'r');
    if (readSync(shm, header, 0, 100, 0) < 100) return Infinity;
    const mx = littleEndian ? header.readUInt32LE(16) : header.readUInt32BE(16);
    const done = littleEndian ? header.readUInt32LE(96) : header.readUInt32BE(96);
    return mx - done;
  } catch {
    return Infinity;
  }
}

function checkpoint(): void {
  checkpointTimer = null;
  try {
    const [row] = connect().lazy.pragma('wal_checkpoint(PASSIVE)') as { log: number; checkpointed: number }[];
    lastCheckpoint = performance.now();
    reply({ type: 'checkpointed', log: row?.log ?? 0, checkpointed: row?.checkpointed ?? 0 });
  } catch (err) {
    closeConnections();
    reply({ type: 'checkpoint-failed', message: err instanceof Error ? err.message : String(err) });
  }
}

/** After a write: a checkpoint now or at the next period, once minFrames wait. */
function considerCheckpoint(): void {
  if (checkpointTimer || uncopied() < settings.minFrames) return;
  const wait = lastCheckpoint + settings.periodMs - performance.now();
  if (wait <= 0) checkpoint();
  else checkpointTimer = setTimeout(checkpoint, wait);
}

function end(): void {
  for (const t of [checkpointTimer, idleTimer]) if (t) clearTimeout(t);
  closeConnections();
  port.close();
}

port.on('message', (m: WriterRequest) => {
  switch (m.type) {
    case 'close':
    case 'exit':
      return end();
    case 'reopen':
      return closeConnections();
    case 'write':
      if (idleTimer) clearTimeout(idleTimer);
      idleTimer = setTimeout(() => reply({ type: 'idle' }), settings.idleMs);
      write(m.id, m.write);
      return considerCheckpoint();
  }
});
