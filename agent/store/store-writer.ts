// The outbox's writer thread (a worker_threads entry; started by store-worker.ts). Its own
// connection to the database makes the writes that wait on the disk: the webhook's group commits
// (one transaction per batch, synchronous=FULL, answered with each record's seq), the publisher's
// delivered marks (synchronous=NORMAL: an update as large as the records it marks), and a PASSIVE
// checkpoint when the WAL holds `minFrames` frames not yet in the database file (what SQLite's
// wal_autocheckpoint would do inside a commit), at most once per `periodMs`; fewer are copied
// `idleCheckpointMs` after the write, so a quiet box's WAL is folded in once rather than per
// record. A PASSIVE checkpoint never blocks the writer; what it cannot copy yet, the next copies.
// After `idleMs` without requests it asks to end (`idle`) and ends when the main side agrees.
//
// Only type imports from the agent's modules: Node runs this file as it is (tsc's and the
// bundle's output, or the TypeScript source with type stripping under the test runner).
import { closeSync, openSync, readSync } from 'node:fs';
import { createRequire } from 'node:module';
import { endianness } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import type BetterSqlite3 from 'better-sqlite3';
import type { CommitRow, WriterReply, WriterRequest, WriterSettings } from './writer-protocol.js';

type Database = BetterSqlite3.Database;
type Statement = BetterSqlite3.Statement;

const settings = workerData as WriterSettings;
const port = parentPort as NonNullable<typeof parentPort>;
const DatabaseCtor = createRequire(import.meta.url)(settings.sqlite) as typeof BetterSqlite3;
const littleEndian = endianness() === 'LE';
const header = Buffer.alloc(100);

let db: Database | null = null;
let shm: number | null = null;
let lastCheckpoint = 0;
let checkpointTimer: NodeJS.Timeout | null = null;
let laterTimer: NodeJS.Timeout | null = null;
let idleTimer: NodeJS.Timeout | null = null;
let insert: Statement | null = null;
let countPending: Statement | null = null;
let marks: { run: Statement; count: Statement; set: Statement; normal: Statement; full: Statement } | null = null;

const reply = (message: WriterReply): void => port.postMessage(message);

function connect(): Database {
  if (db) return db;
  db = new DatabaseCtor(settings.path, { fileMustExist: true });
  // Off the event loop, but a webhook waits on it: fail within 2 s (503, Retry-After) rather
  // than queue batch after batch behind another process's lock until the request times out.
  db.pragma('busy_timeout = 2000');
  db.pragma('synchronous = FULL');
  if (settings.maxPageCount) db.pragma(`max_page_count = ${settings.maxPageCount}`);
  return db;
}

function closeConnection(): void {
  if (db?.open) db.close();
  db = null;
  insert = countPending = marks = null;
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

/** A failure that is not SQLite's own (the file went away...) drops the connection: the next request opens it again. */
function failed(id: number, err: unknown): void {
  const code = sqliteCode(err);
  if (!code?.startsWith('SQLITE_')) closeConnection();
  reply({ type: 'failed', id, failure: { code, message: err instanceof Error ? err.message : String(err) } });
}

/** One transaction for a batch of new records; for each, its seq, or null when already stored. */
function commit(id: number, rows: CommitRow[]): void {
  try {
    const d = connect();
    insert ??= d.prepare(settings.insertSql);
    countPending ??= d.prepare("UPDATE counters SET value = value + ? WHERE name = 'pending'");
    const ins = insert;
    const count = countPending;
    const seqs: (number | null)[] = [];
    d.transaction(() => {
      seqs.length = 0;
      let n = 0;
      for (const row of rows) {
        const r = ins.get(row) as { seq: number } | undefined;
        seqs.push(r ? r.seq : null);
        if (r) n++;
      }
      if (n > 0) count.run(n);
    }).immediate();
    reply({ type: 'committed', id, seqs });
  } catch (err) {
    failed(id, err);
  }
}

/** Records whose PUBACK came, marked in one transaction without an fsync of its own (lost to a power cut, they are only sent again). */
function deliver(id: number, ranges: [number, number][], at: number): void {
  try {
    const d = connect();
    marks ??= {
      run: d.prepare(settings.deliverSql),
      count: d.prepare('UPDATE counters SET value = value + ? WHERE name = ?'),
      set: d.prepare('UPDATE counters SET value = ? WHERE name = ?'),
      normal: d.prepare('PRAGMA synchronous = NORMAL'),
      full: d.prepare('PRAGMA synchronous = FULL'),
    };
    const m = marks;
    let changed = 0;
    m.normal.run();
    try {
      d.transaction(() => {
        changed = 0;
        for (const [first, last] of ranges) changed += m.run.run(at, first, last).changes;
        if (changed > 0) {
          m.count.run(-changed, 'pending');
          m.count.run(changed, 'delivered');
          m.set.run(at, 'last_delivery_at');
        }
      }).immediate();
    } finally {
      if (d.open) m.full.run();
    }
    reply({ type: 'delivered', id, changed });
  } catch (err) {
    failed(id, err);
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
  if (laterTimer) clearTimeout(laterTimer);
  laterTimer = null;
  try {
    const [row] = connect().pragma('wal_checkpoint(PASSIVE)') as { log: number; checkpointed: number }[];
    lastCheckpoint = Date.now();
    reply({ type: 'checkpointed', log: row?.log ?? 0, checkpointed: row?.checkpointed ?? 0 });
  } catch (err) {
    closeConnection();
    reply({ type: 'checkpoint-failed', message: err instanceof Error ? err.message : String(err) });
  }
}

/** After this thread's own commit: a checkpoint now if the WAL has grown enough (none is scheduled). */
function checkpointIfLarge(): void {
  if (!checkpointTimer && uncopied() >= settings.minFrames) checkpoint();
}

/** After the event loop's commit: a checkpoint now, at the next period, or later when the WAL is small. */
function considerCheckpoint(): void {
  if (checkpointTimer) return;
  if (uncopied() < settings.minFrames) {
    laterTimer ??= setTimeout(checkpoint, settings.idleCheckpointMs);
    return;
  }
  const wait = lastCheckpoint + settings.periodMs - Date.now();
  if (wait <= 0) checkpoint();
  else checkpointTimer = setTimeout(checkpoint, wait);
}

function end(): void {
  for (const t of [checkpointTimer, laterTimer, idleTimer]) if (t) clearTimeout(t);
  closeConnection();
  port.close();
}

port.on('message', (m: WriterRequest) => {
  switch (m.type) {
    case 'close':
    case 'exit':
      return end();
    case 'reopen':
      return closeConnection();
    default:
      break;
  }
  if (idleTimer) clearTimeout(idleTimer);
  idleTimer = setTimeout(() => reply({ type: 'idle' }), settings.idleMs);
  switch (m.type) {
    case 'commit':
      commit(m.id, m.rows);
      return checkpointIfLarge();
    case 'deliver':
      deliver(m.id, m.ranges, m.at);
      return checkpointIfLarge();
    case 'written':
      reply({ type: 'noted' });
      return considerCheckpoint();
  }
});
