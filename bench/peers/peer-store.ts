import Database from 'better-sqlite3';

/** One record to commit, as the webhook peer sends it to wherever its commit runs. */
export interface PeerRecord {
  transactionId: string;
  status: string;
  record: string;
}

/**
 * The webhook peer's database: one table keyed by (TransactionId, Status), WAL and
 * synchronous=FULL, so a commit returns only once it is on disk. Returns the commit of one record,
 * on the thread that opened it.
 */
export function openPeerStore(path: string): { commit: (r: PeerRecord) => void; close: () => void } {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec('CREATE TABLE IF NOT EXISTS transactions (transaction_id TEXT NOT NULL, status TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (transaction_id, status))');
  const insert = db.prepare('INSERT OR IGNORE INTO transactions (transaction_id, status, record) VALUES (?, ?, ?)');
  return {
    commit: (r) => void insert.run(r.transactionId, r.status, r.record),
    close: () => db.close(),
  };
}
