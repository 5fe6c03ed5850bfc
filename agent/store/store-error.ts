import Database from 'better-sqlite3';
import { AgentError, errorCode, errorMessage } from '../platform/errors.js';

export type StoreErrorCode = 'STORE_FULL' | 'STORE_FAILED' | 'STORE_OPEN_FAILED' | 'STORE_DAMAGED' | 'STORE_GONE' | 'STORE_LOCKED' | 'STORE_READONLY' | 'STORE_DISK_FAILED';

export class StoreError extends AgentError {
  declare readonly code: StoreErrorCode;
  constructor(code: StoreErrorCode, message: string, cause?: unknown) {
    super(code, message, cause === undefined ? undefined : { cause });
    this.name = 'StoreError';
  }
}

export const isSqliteError = (err: unknown): boolean => err instanceof Database.SqliteError || (err instanceof Error && err.name === 'SqliteError');

/** A SQLite failure (or the writer thread's report of one) as what it means for the site. */
export function toStoreError(err: unknown, doing: string): StoreError {
  if (err instanceof StoreError) return err;
  const code = errorCode(err) ?? '';
  if (code === 'SQLITE_FULL') return new StoreError('STORE_FULL', `database full while ${doing} (disk or storage.maxSizeMb)`, err);
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) {
    return new StoreError('STORE_LOCKED', `the database is locked by another process (an sqlite3 shell, a backup?) while ${doing}`, err);
  }
  if (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB') {
    return new StoreError('STORE_DAMAGED', `the database file is damaged (${errorMessage(err)}) while ${doing}`, err);
  }
  return new StoreError('STORE_FAILED', `database error while ${doing}: ${errorMessage(err)}`, err);
}
