import Database from 'better-sqlite3';
import type { Writer } from './writer.js';
import { Writes, type ResultOf, type WriteOp } from './writes.js';

/** Pages in the WAL before a commit checkpoints inline: SQLite's 1000 would stall longer. */
const INLINE_CHECKPOINT_PAGES = 250;

export interface InlineWriterOptions {
  /** The event loop's connection: the one used for both kinds of write when the database is in memory. */
  main: Database.Database;
  path: string;
  inMemory: boolean;
  maxPageCount?: number | undefined;
}

/**
 * The writes on the caller's thread, for an in-memory database (its one connection is the only
 * way to it) and for the CLI's short runs. On a file it opens the durable and lazy connections as
 * the writer thread does, so each keeps one synchronous setting for life.
 */
export class InlineWriter implements Writer {
  private writes: Writes | null = null;
  private owned: Database.Database[] = [];

  constructor(private readonly opts: InlineWriterOptions) {}

  private connect(): Writes {
    if (this.writes) return this.writes;
    if (this.opts.inMemory) {
      this.writes = new Writes({ durable: this.opts.main, lazy: this.opts.main });
      return this.writes;
    }
    const open = (synchronous: string): Database.Database => {
      const db = new Database(this.opts.path, { fileMustExist: true });
      this.owned.push(db);
      db.pragma('busy_timeout = 2000');
      db.pragma(`synchronous = ${synchronous}`);
      db.pragma(`wal_autocheckpoint = ${INLINE_CHECKPOINT_PAGES}`);
      if (this.opts.maxPageCount) db.pragma(`max_page_count = ${this.opts.maxPageCount}`);
      return db;
    };
    try {
      this.writes = new Writes({ durable: open('FULL'), lazy: open('NORMAL') });
    } catch (err) {
      this.reopen();
      throw err;
    }
    return this.writes;
  }

  write<W extends WriteOp>(w: W): Promise<ResultOf<W['op']>> {
    try {
      return Promise.resolve(this.connect().run(w) as ResultOf<W['op']>);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  reopen(): void {
    for (const db of this.owned) if (db.open) db.close();
    this.owned = [];
    this.writes = null;
  }

  close(): void {
    this.reopen();
  }

  ended(): Promise<void> {
    return Promise.resolve();
  }
}
