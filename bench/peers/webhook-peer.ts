/**
 * The ingest peer: the least a webhook receiver with the agent's durability can do. Reads the
 * body (64 KiB at most), checks base64(HMAC-SHA256(body, secret)) in constant time, parses it,
 * inserts the record with one better-sqlite3 commit (WAL, synchronous=FULL) and only then answers
 * 200 {}. One commit per request; no MQTT, no logging.
 *
 * With MODE `thread` the same commit runs on a worker thread (peer-writer.ts) and the event loop
 * awaits its answer: what keeping the loop off the disk costs a receiver that does nothing else,
 * the floor under the agent's own design (docs/ARCHITECTURE.md, "What one webhook at a time costs").
 * Usage: node dist/bench/peers/webhook-peer.js PORT SECRET DB_PATH [inline|thread]. Prints "listening".
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import { Worker } from 'node:worker_threads';
import { openPeerStore, type PeerRecord } from './peer-store.js';
import type { PeerWriteReply, PeerWriteRequest } from './peer-writer.js';

const [port, secret, dbPath, mode = 'inline'] = process.argv.slice(2);
if (!port || !secret || !dbPath || (mode !== 'inline' && mode !== 'thread')) throw new Error('usage: webhook-peer PORT SECRET DB_PATH [inline|thread]');

/** Calls `done` once the record's commit is on disk (inline: before it returns, no promise in between). */
type Commit = (r: PeerRecord, done: (failed: boolean) => void) => void;

function inlineCommit(path: string): { commit: Commit; close: () => void } {
  const store = openPeerStore(path);
  return {
    commit: (r, done) => {
      let failed = false;
      try {
        store.commit(r);
      } catch {
        failed = true;
      }
      done(failed);
    },
    close: store.close,
  };
}

function threadCommit(path: string): { commit: Commit; close: () => void } {
  const worker = new Worker(new URL('./peer-writer.js', import.meta.url), { workerData: path });
  const waiting = new Map<number, (failed: boolean) => void>();
  worker.on('message', (m: PeerWriteReply) => {
    const done = waiting.get(m.id);
    waiting.delete(m.id);
    done?.(m.error !== undefined);
  });
  let nextId = 1;
  return {
    commit: (r, done) => {
      const id = nextId++;
      waiting.set(id, done);
      worker.postMessage({ id, ...r } satisfies PeerWriteRequest);
    },
    close: () => void worker.terminate(),
  };
}

const store = mode === 'thread' ? threadCommit(dbPath) : inlineCommit(dbPath);

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
    let rec: Record<string, unknown>;
    try {
      rec = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
    } catch {
      res.writeHead(400).end();
      return;
    }
    store.commit({ transactionId: String(rec['TransactionId']), status: String(rec['Status']), record: body.toString('utf8') }, (failed) => {
      if (failed) res.writeHead(500).end();
      else res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
});
server.listen(Number(port), '127.0.0.1', () => process.stdout.write('listening\n'));
process.on('SIGTERM', () => server.close(() => (store.close(), process.exit(0))));
