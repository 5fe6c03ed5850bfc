/**
 * The ingest peer: the least a webhook receiver with the agent's durability can do. Reads the
 * body (64 KiB at most), checks base64(HMAC-SHA256(body, secret)) in constant time, parses it,
 * inserts the record with one better-sqlite3 commit (WAL, synchronous=FULL) and only then answers
 * 200 {}. One commit per request; no MQTT, no logging.
 * Usage: node dist/bench/peers/webhook-peer.js PORT SECRET DB_PATH. Prints "listening".
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import Database from 'better-sqlite3';

const [port, secret, dbPath] = process.argv.slice(2);
if (!port || !secret || !dbPath) throw new Error('usage: webhook-peer PORT SECRET DB_PATH');
const db = new Database(dbPath);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = FULL');
db.exec('CREATE TABLE IF NOT EXISTS transactions (transaction_id TEXT NOT NULL, status TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (transaction_id, status))');
const insert = db.prepare('INSERT OR IGNORE INTO transactions (transaction_id, status, record) VALUES (?, ?, ?)');

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (c: Buffer) => {
    size += c.length;
    if (size <= 65_536) chunks.push(c);
  });
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const given = Buffer.from(String(req.headers['x-vendor-signature'] ?? ''), 'base64');
    const expected = createHmac('sha256', secret).update(body).digest();
    if (size > 65_536 || given.length !== expected.length || !timingSafeEqual(given, expected)) {
      res.writeHead(401).end();
      return;
    }
    try {
      const rec = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
      insert.run(String(rec['TransactionId']), String(rec['Status']), body.toString('utf8'));
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    } catch {
      res.writeHead(400).end();
    }
  });
});
server.listen(Number(port), '127.0.0.1', () => process.stdout.write('listening\n'));
process.on('SIGTERM', () => server.close(() => (db.close(), process.exit(0))));
