import type { ResultOf, WriteOp } from './writes.js';

/**
 * Where the outbox's writes are made: on the writer thread (ThreadWriter, the running agent) or
 * on the caller's thread (InlineWriter: an in-memory database, the CLI). Either way a write is a
 * promise that settles once it is committed, and writes are committed in the order they were
 * asked for.
 */
export interface Writer {
  write<W extends WriteOp>(w: W): Promise<ResultOf<W['op']>>;
  /** The database file was recreated: connections to the old one are dropped. */
  reopen(): void;
  close(): void;
  /**
   * Resolves once the writer holds no connection: for the thread, once every thread it started
   * has ended, those let go after a quiet spell included.
   */
  ended(): Promise<void>;
}

/** A write the writer could not make: the SQLite code (SQLITE_FULL, ...) and message. */
export class WriteFailed extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
  ) {
    super(message);
    this.name = 'WriteFailed';
  }
}
