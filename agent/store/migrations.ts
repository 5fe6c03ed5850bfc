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
  // 2: records the broker refuses are parked (and retried on a schedule) instead of blocking the
  // rest; a checksum of the stored text; backlog counters kept with the rows they count.
  `ALTER TABLE transactions ADD COLUMN parked_at INTEGER;
   ALTER TABLE transactions ADD COLUMN park_reason TEXT;
   ALTER TABLE transactions ADD COLUMN park_count INTEGER NOT NULL DEFAULT 0;
   ALTER TABLE transactions ADD COLUMN retry_at INTEGER;
   ALTER TABLE transactions ADD COLUMN record_crc INTEGER;
   DROP INDEX transactions_pending;
   CREATE INDEX transactions_pending ON transactions (seq) WHERE delivered_at IS NULL AND parked_at IS NULL;
   CREATE INDEX transactions_parked ON transactions (retry_at) WHERE delivered_at IS NULL AND parked_at IS NOT NULL;
   CREATE TABLE counters (
     name  TEXT PRIMARY KEY,
     value INTEGER NOT NULL
   ) WITHOUT ROWID;
   INSERT INTO counters (name, value) VALUES
     ('pending', (SELECT COUNT(*) FROM transactions WHERE delivered_at IS NULL)),
     ('parked', 0),
     ('delivered', (SELECT COUNT(*) FROM transactions WHERE delivered_at IS NOT NULL)),
     ('last_delivery_at', COALESCE((SELECT MAX(delivered_at) FROM transactions), 0));`,
  // 3: the start request a record is tied to (POS correlation); records by time of receipt (resend).
  `ALTER TABLE transactions ADD COLUMN start_request TEXT;
   CREATE INDEX transactions_received ON transactions (received_at);`,
  // 4: records delivered in order are covered by a watermark, not marked one by one: every record
  // with seq <= delivered_through is delivered, whatever its delivered_at says (NULL for those the
  // watermark covered). A mark rewrote each record's page and two index entries; on an SD card
  // that was a second write of every record. Each move of the watermark is kept for retention.
  `INSERT INTO counters (name, value) VALUES ('delivered_through', 0);
   CREATE TABLE delivered_through (
     at  INTEGER PRIMARY KEY,
     seq INTEGER NOT NULL
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
