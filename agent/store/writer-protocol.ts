/**
 * The messages between the outbox (event loop) and its writer thread (store-writer.ts). Requests
 * with an `id` get exactly one reply with that id; `written` gets exactly one `noted`. Checkpoint
 * results and the writer's wish to end are events of their own, never taken for a reply.
 */

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

export interface WriterSettings {
  /** better-sqlite3's entry, resolved on the main side (the worker has no module resolution of its own for it). */
  sqlite: string;
  path: string;
  /** The INSERT ... RETURNING seq statement the outbox uses. */
  insertSql: string;
  /** The UPDATE that marks a range of seqs delivered: (at, first, last). */
  deliverSql: string;
  /** PRAGMA max_page_count (storage.maxSizeMb); 0 for none. */
  maxPageCount: number;
  minFrames: number;
  idleCheckpointMs: number;
  periodMs: number;
  idleMs: number;
}

export type WriterRequest =
  /** Commit these rows in one transaction (synchronous=FULL). */
  | { type: 'commit'; id: number; rows: CommitRow[] }
  /** Mark these seq ranges delivered at `at` (synchronous=NORMAL). */
  | { type: 'deliver'; id: number; ranges: [number, number][]; at: number }
  /** The event loop's connection committed: checkpoint when the WAL asks for it. */
  | { type: 'written' }
  /** The database file was recreated: drop the connection to the old one. */
  | { type: 'reopen' }
  /** The outbox closes: close the connection and end. */
  | { type: 'close' }
  /** The answer to `idle` when nothing is waiting: end now (nothing more will be posted to this thread). */
  | { type: 'exit' };

export interface WriterFailure {
  code?: string | undefined;
  message: string;
}

export type WriterReply =
  | { type: 'committed'; id: number; seqs: (number | null)[] }
  | { type: 'delivered'; id: number; changed: number }
  | { type: 'failed'; id: number; failure: WriterFailure }
  /** The one answer to `written`. */
  | { type: 'noted' }
  /** A checkpoint ran: frames in the WAL, and how many of them are in the database file now. */
  | { type: 'checkpointed'; log: number; checkpointed: number }
  | { type: 'checkpoint-failed'; message: string }
  /**
   * No request for idleMs: the thread would end. It ends only when the main side answers `exit`,
   * which it does only with nothing waiting, so a commit posted meanwhile is never lost or failed.
   */
  | { type: 'idle' };
