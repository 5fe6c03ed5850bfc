import type Database from 'better-sqlite3';

/**
 * Schema migrations, applied in order by PRAGMA user_version. Append only: a released migration
 * is never edited.
 */
export const MIGRATIONS: readonly string[] = [
  `CREATE TABLE transactions (
     seq            INTEGER PRIMARY KEY AUTOINCREMENT,
     transaction_id TEXT    NOT NULL,
     status         TEXT    NOT NULL,
     device_id      TEXT    NOT NULL,
     record         TEXT    NOT NULL,
     source         TEXT    NOT NULL,
     received_at    INTEGER NOT NULL,
     delivered_at   INTEGER,
     UNIQUE (transaction_id, status)
   );
   CREATE INDEX transactions_pending ON transactions (seq) WHERE delivered_at IS NULL;
   CREATE INDEX transactions_delivered ON transactions (delivered_at) WHERE delivered_at IS NOT NULL;
   CREATE TABLE state (
     key   TEXT PRIMARY KEY,
     value TEXT NOT NULL
   );`,
];

/** Brings the database to the latest schema; returns the version it was at. Writes nothing when current. */
export function migrate(db: Database.Database): number {
  const from = db.pragma('user_version', { simple: true }) as number;
  if (from > MIGRATIONS.length) {
    throw new Error(`the database is at schema version ${from}, newer than this agent knows (${MIGRATIONS.length}); upgrade the agent`);
  }
  for (let v = from; v < MIGRATIONS.length; v++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[v] as string);
      db.pragma(`user_version = ${v + 1}`);
    })();
  }
  return from;
}
