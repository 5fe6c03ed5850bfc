import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { Pool } from 'undici';
import { signBody } from '../agent/http/sign.js';
import { Simulator } from '../agent/simulator/simulator.js';
import { startAgent, writeAgentConfig } from './lib/agent-proc.js';
import { startBroker } from './lib/broker.js';
import { freePort } from './lib/ports.js';
import { vendorFields } from './lib/records.js';
import { round } from './lib/stats.js';

export interface IngestResult {
  requests: number;
  concurrency: number;
  seconds: number;
  perSecond: number;
  stored: number;
}

/** Signed webhooks answered 200, each only after its record is committed (synchronous=FULL). */
export async function benchWebhookIngest(requests = 3000, concurrency = 16): Promise<IngestResult> {
  const broker = await startBroker();
  const sim = new Simulator({ apiKey: 'ingest-key', chairs: 4 });
  await sim.start();
  const dir = mkdtempSync(join(tmpdir(), 'bench-ingest-'));
  const port = await freePort();
  const secret = 'ingest-secret-0123';
  const dbPath = join(dir, 'agent.db');
  const config = writeAgentConfig(
    dir,
    `site: {id: ingest}
vendor: {baseUrl: "${sim.url}", apiKey: ingest-key}
webhook: {channelSecret: ${secret}}
http: {host: 127.0.0.1, port: ${port}}
mqtt: {url: "${broker.url}"}
storage: {path: ${dbPath}}
log: {level: warn}
`,
  );
  const agent = startAgent(config);
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: concurrency });
  try {
    for (let i = 0; ; i++) {
      try {
        const r = await pool.request({ path: '/healthz', method: 'GET' });
        await r.body.dump();
        break;
      } catch {
        if (i > 200) throw new Error(`the agent did not start:\n${agent.output()}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    }
    const bodies = Array.from({ length: requests }, (_, i) => JSON.stringify(vendorFields(`ING-${i}`, i)));
    let next = 0;
    let ok = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < bodies.length) {
          const body = bodies[next++] as string;
          const res = await pool.request({
            path: '/vendor/webhook',
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-vendor-signature': signBody(body, secret) },
            body,
          });
          await res.body.dump();
          if (res.statusCode === 200) ok++;
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    if (ok !== requests) throw new Error(`only ${ok} of ${requests} webhooks answered 200`);
    await agent.stop();
    const db = new Database(dbPath, { readonly: true });
    const stored = (db.prepare('SELECT COUNT(*) AS n FROM transactions').get() as { n: number }).n;
    db.close();
    return { requests, concurrency, seconds: round(seconds, 2), perSecond: Math.round(requests / seconds), stored };
  } finally {
    await pool.close();
    await agent.stop();
    await sim.close();
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
