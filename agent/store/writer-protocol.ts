/**
 * The messages between the outbox's writer (thread-writer.ts, on the event loop) and its thread
 * (store-writer.ts). A `write` gets exactly one reply with its id, `done` or `failed`. Checkpoint
 * results and the thread's wish to end are events of their own, never taken for a reply.
 */
import type { WriteOp, WriteResult } from './writes.ts';

export interface WriterSettings {
  /** better-sqlite3's entry, resolved on the main side (the worker has no module resolution of its own for it). */
  sqlite: string;
  path: string;
  /** PRAGMA max_page_count (storage.maxSizeMb); 0 for none. */
  maxPageCount: number;
  minFrames: number;
  periodMs: number;
  idleMs: number;
  /** How long a write waits for another process's lock. */
  busyTimeoutMs: number;
}

export type WriterRequest =
  | { type: 'write'; id: number; write: WriteOp }
  /** The database file was recreated: drop the connections to the old one. */
  | { type: 'reopen' }
  /** The outbox closes: close the connections and end. */
  | { type: 'close' }
  /** The answer to `idle` when nothing is waiting: end now (nothing more will be posted to this thread). */
  | { type: 'exit' };

export interface WriterFailure {
  code?: string | undefined;
  message: string;
}

export type WriterReply =
  | { type: 'done'; id: number; result: WriteResult }
  | { type: 'failed'; id: number; failure: WriterFailure }
  /** A checkpoint ran: frames in the WAL, and how many of them are in the database file now. */
  | { type: 'checkpointed'; log: number; checkpointed: number }
  | { type: 'checkpoint-failed'; message: string }
  /**
   * No request for idleMs: the thread would end. It ends only when the main side answers `exit`,
   * which it does only with nothing waiting, so a write posted meanwhile is never lost or failed.
   */
  | { type: 'idle' };
