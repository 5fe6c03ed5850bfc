import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { Pool } from 'undici';
import { signBody } from '../agent/http/sign.js';
import { Simulator } from '../agent/simulator/simulator.js';
import { startAgent, writeAgentConfig, type BenchAgent } from './lib/agent-proc.js';
import { startBroker, type TestBroker } from './lib/broker.js';
import { freePort } from './lib/ports.js';
import { sample } from './lib/proc.js';
import { vendorFields } from './lib/records.js';
import { BENCH_DIR, sleep, spawnNode, type Proc } from './lib/spawn.js';
import { median, percentile, round } from './lib/stats.js';

const SECRET = 'ingest-secret-0123';
const WARM = Number(process.env['INGEST_WARM'] ?? 500);

export interface IngestSide {
  perSecond: number[];
  p50Ms: number;
  p99Ms: number;
  bytesPerRecord: number;
}

export interface IngestResult {
  requests: number;
  concurrency: number;
  runs: number;
  agent: IngestSide;
  peer: IngestSide;
  /** Agent throughput over the peer's (medians). */
  ratio: number;
}

async function waitHealthy(pool: Pool, path: string, what: () => string): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      const r = await pool.request({ path, method: 'GET' });
      await r.body.dump();
      return;
    } catch {
      if (i > 400) throw new Error(`did not start:\n${what()}`);
      await sleep(25);
    }
  }
}

/** `requests` signed webhooks from `concurrency` clients; each answered 200 after its commit. */
async function drive(port: number, runId: string, requests: number, concurrency: number, pid: number): Promise<{ perSecond: number; latencies: number[]; bytes: number }> {
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: concurrency, pipelining: 1 });
  const bodies = Array.from({ length: requests }, (_, i) => {
    const body = JSON.stringify(vendorFields(`${runId}-${i}`, i));
    return { body, signature: signBody(body, SECRET) };
  });
  const latencies: number[] = [];
  let next = 0;
  let ok = 0;
  const before = sample(pid).writeBytes;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < bodies.length) {
        const b = bodies[next++] as { body: string; signature: string };
        const s = performance.now();
        const res = await pool.request({ path: '/vendor/webhook', method: 'POST', headers: { 'content-type': 'application/json', 'x-vendor-signature': b.signature }, body: b.body });
        await res.body.dump();
        latencies.push(performance.now() - s);
        if (res.statusCode === 200) ok++;
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  await sleep(300); // a checkpoint that follows the run is part of its cost
  const bytes = sample(pid).writeBytes - before;
  await pool.close();
  if (ok !== requests) throw new Error(`only ${ok} of ${requests} answered 200`);
  return { perSecond: requests / seconds, latencies, bytes };
}

async function agentSide(dir: string, sim: Simulator, broker: TestBroker): Promise<{ port: number; proc: BenchAgent; db: string }> {
  const port = await freePort();
  const db = join(dir, `agent-${port}.db`);
  const config = writeAgentConfig(
    dir,
    `site: {id: ingest}
vendor: {baseUrl: "${sim.url}", apiKey: ingest-key}
webhook: {channelSecret: ${SECRET}}
transactions: {syncSchedule: "0 0 0 1 1 *"}
http: {host: 127.0.0.1, port: ${port}}
mqtt: {url: "${broker.url}"}
storage: {path: ${db}}
`,
  );
  return { port, proc: startAgent(config), db };
}

async function peerSide(dir: string): Promise<{ port: number; proc: Proc; db: string }> {
  const port = await freePort();
  const db = join(dir, `peer-${port}.db`);
  const proc = spawnNode(join(BENCH_DIR, 'peers', 'webhook-peer.js'), [String(port), SECRET, db]);
  await proc.line((l) => l === 'listening', 'listening');
  return { port, proc, db };
}

const count = (db: string): number => {
  const d = new Database(db, { readonly: true });
  const n = (d.prepare('SELECT COUNT(*) AS n FROM transactions').get() as { n: number }).n;
  d.close();
  return n;
};

/**
 * Webhook ingest, the agent (a separate process, broker up, publishing what it stores) against the
 * minimal peer with the same durability (bench/peers/webhook-peer.ts: one synchronous=FULL commit
 * per request), in the same run, alternating. Throughput, client-side latency, and bytes the
 * process caused to be written per record (/proc/PID/io, the checkpoint that follows included).
 */
export async function benchIngest(requests = 4000, concurrency = 16, runs = 5): Promise<IngestResult> {
  const broker = await startBroker();
  const sim = new Simulator({ apiKey: 'ingest-key', chairs: 4 });
  await sim.start();
  const dir = mkdtempSync(join(tmpdir(), 'bench-ingest-'));
  const a = await agentSide(dir, sim, broker);
  const p = await peerSide(dir);
  const agentPool = new Pool(`http://127.0.0.1:${a.port}`);
  await waitHealthy(agentPool, '/healthz', () => a.proc.output());
  await agentPool.close();
  const agent = { perSecond: [] as number[], latencies: [] as number[], bytes: 0 };
  const peer = { perSecond: [] as number[], latencies: [] as number[], bytes: 0 };
  try {
    await drive(a.port, 'warm-a', WARM, concurrency, a.proc.child.pid as number);
    await drive(p.port, 'warm-p', WARM, concurrency, p.proc.pid);
    for (let run = 0; run < runs; run++) {
      const order: ['a' | 'p', number][] = run % 2 === 0 ? [['a', a.port], ['p', p.port]] : [['p', p.port], ['a', a.port]];
      for (const [who, port] of order) {
        const r = await drive(port, `${who}${run}`, requests, concurrency, who === 'a' ? (a.proc.child.pid as number) : p.proc.pid);
        const side = who === 'a' ? agent : peer;
        side.perSecond.push(r.perSecond);
        side.latencies.push(...r.latencies);
        side.bytes += r.bytes;
      }
    }
    await a.proc.stop();
    await p.proc.stop();
    const total = runs * requests + WARM;
    if (count(a.db) !== total || count(p.db) !== total) throw new Error(`stored ${count(a.db)} and ${count(p.db)} of ${total}`);
  } finally {
    await a.proc.stop();
    await p.proc.stop();
    await sim.close();
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const side = (s: typeof agent): IngestSide => ({
    perSecond: s.perSecond.map((x) => Math.round(x)),
    p50Ms: round(percentile(s.latencies, 50), 2),
    p99Ms: round(percentile(s.latencies, 99), 2),
    bytesPerRecord: Math.round(s.bytes / (runs * requests)),
  });
  return { requests, concurrency, runs, agent: side(agent), peer: side(peer), ratio: round(median(agent.perSecond) / median(peer.perSecond), 2) };
}
