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
import { cpuMsBetween, cpuSnapshot, sample } from './lib/proc.js';
import { vendorFields } from './lib/records.js';
import { BENCH_DIR, sleep, spawnNode, type Proc } from './lib/spawn.js';
import { paired, type Paired } from './lib/paired.js';
import { slowFsyncEnv } from './lib/slow-fsync.js';
import { percentile, round } from './lib/stats.js';

export const SECRET = 'ingest-secret-0123';

export interface IngestSide {
  perSecond: number[];
  p50Ms: number;
  p99Ms: number;
  bytesPerRecord: number;
  /** CPU of the whole process (every thread) per record, ms: the agent's until it has delivered the run. */
  cpuMsPerRecord: number;
}

export interface IngestResult {
  requests: number;
  concurrency: number;
  runs: number;
  /** Added to every fsync of both processes (the SD-card case); 0: this machine's disk as it is. */
  fsyncMs: number;
  agent: IngestSide;
  peer: IngestSide;
  /** Agent throughput over the peer's, per round. */
  ratio: Paired;
  /** Agent bytes per record over the peer's. */
  bytesRatio: number;
  /** With `threadPeer`: the peer with its commit on a worker thread, and its rate over the peer's per round. */
  threadPeer?: IngestSide;
  threadRatio?: Paired;
}

export interface IngestOptions {
  requests: number;
  concurrency: number;
  runs: number;
  fsyncMs?: number;
  /** The fsync-delay shim (bench/lib/slow-fsync.ts), when fsyncMs > 0. */
  shim?: string;
  /**
   * Also the peer with its commit on a worker thread (its `thread` mode), in the same rounds: what
   * keeping the event loop off the disk costs a receiver that does nothing else.
   */
  threadPeer?: boolean;
}

export async function waitHealthy(pool: Pool, path: string, what: () => string): Promise<void> {
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
/**
 * What the rest of a run costs: the pages still only in the WAL, copied into the database file by
 * a full checkpoint made here right after the run (counted as this process's writes), so a design
 * that checkpoints later is not credited with writes it has only put off.
 */
function checkpointBytes(db: string): number {
  const before = sample(process.pid).writeBytes;
  const d = new Database(db);
  d.pragma('busy_timeout = 5000');
  d.pragma('wal_checkpoint(TRUNCATE)');
  d.close();
  return sample(process.pid).writeBytes - before;
}

/**
 * Until the agent has delivered (and marked) every record it stored: its metrics say none waits.
 * The peers deliver nothing, so what a record costs the agent includes its sending.
 */
async function delivered(port: number): Promise<void> {
  const pool = new Pool(`http://127.0.0.1:${port}`);
  try {
    for (let i = 0; ; i++) {
      const r = await pool.request({ path: '/metrics', method: 'GET' });
      const text = await r.body.text();
      if (/^chair_agent_outbox_pending 0$/m.test(text)) return;
      if (i > 120) throw new Error('the agent did not deliver the run within 30 s');
      // Its delivered marks are made every 200 ms: each look costs the agent CPU too.
      await sleep(250);
    }
  } finally {
    await pool.close();
  }
}

async function drive(port: number, runId: string, requests: number, concurrency: number, pid: number, db: string, settle?: () => Promise<void>): Promise<{ perSecond: number; latencies: number[]; bytes: number; cpuMs: number }> {
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: concurrency, pipelining: 1 });
  const bodies = Array.from({ length: requests }, (_, i) => {
    const body = JSON.stringify(vendorFields(`${runId}-${i}`, i));
    return { body, signature: signBody(body, SECRET) };
  });
  const latencies: number[] = [];
  let next = 0;
  let ok = 0;
  const before = sample(pid).writeBytes;
  const cpuBefore = cpuSnapshot(pid);
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
  await pool.close();
  if (ok !== requests) throw new Error(`only ${ok} of ${requests} answered 200`);
  await settle?.();
  const cpuMs = cpuMsBetween(cpuBefore, cpuSnapshot(pid));
  const bytes = sample(pid).writeBytes - before + checkpointBytes(db);
  return { perSecond: requests / seconds, latencies, bytes, cpuMs };
}

export async function agentSide(dir: string, sim: Simulator, broker: TestBroker, env: NodeJS.ProcessEnv): Promise<{ port: number; proc: BenchAgent; db: string }> {
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
  return { port, proc: startAgent(config, env), db };
}

export async function peerSide(dir: string, env: NodeJS.ProcessEnv, mode: 'inline' | 'thread' = 'inline'): Promise<{ port: number; proc: Proc; db: string }> {
  const port = await freePort();
  const db = join(dir, `peer-${mode}-${port}.db`);
  const proc = spawnNode(join(BENCH_DIR, 'peers', 'webhook-peer.js'), [String(port), SECRET, db, mode], env);
  await proc.line((l) => l === 'listening', 'listening');
  return { port, proc, db };
}

/**
 * What both webhook benches stand on: a broker, a simulated vendor, a scratch directory for the
 * databases, and the agent (healthy) beside the one-commit peer, both under `env`.
 */
export async function webhookScene(prefix: string, env: NodeJS.ProcessEnv): Promise<{ dir: string; agent: Awaited<ReturnType<typeof agentSide>>; peer: Awaited<ReturnType<typeof peerSide>>; close(): Promise<void> }> {
  const broker = await startBroker();
  const sim = new Simulator({ apiKey: 'ingest-key', chairs: 4 });
  await sim.start();
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const agent = await agentSide(dir, sim, broker, env);
  const peer = await peerSide(dir, env);
  const pool = new Pool(`http://127.0.0.1:${agent.port}`);
  await waitHealthy(pool, '/healthz', () => agent.proc.output());
  await pool.close();
  return {
    dir,
    agent,
    peer,
    close: async () => {
      await agent.proc.stop();
      await peer.proc.stop();
      await sim.close();
      await broker.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
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
export async function benchIngest(o: IngestOptions): Promise<IngestResult> {
  const { requests, concurrency, runs } = o;
  const fsyncMs = o.fsyncMs ?? 0;
  if (fsyncMs > 0 && !o.shim) throw new Error('an fsync delay needs the shim');
  const env = o.shim ? slowFsyncEnv(o.shim, fsyncMs) : { ...process.env };
  const warm = Math.min(500, Math.ceil(requests / 2));
  const scene = await webhookScene('bench-ingest-', env);
  const { agent: a, peer: p } = scene;
  const t = o.threadPeer ? await peerSide(scene.dir, env, 'thread') : null;
  type Side = { port: number; pid: number; db: string; settle?: () => Promise<void>; perSecond: number[]; latencies: number[]; bytes: number; cpuMs: number };
  const sideOf = (port: number, pid: number, db: string): Side => ({ port, pid, db, perSecond: [], latencies: [], bytes: 0, cpuMs: 0 });
  const agent: Side = { ...sideOf(a.port, a.proc.child.pid as number, a.db), settle: () => delivered(a.port) };
  const peer = sideOf(p.port, p.proc.pid, p.db);
  const thread = t ? sideOf(t.port, t.proc.pid, t.db) : null;
  const sides = thread ? [agent, peer, thread] : [agent, peer];
  try {
    for (const [i, s] of sides.entries()) await drive(s.port, `warm-${i}`, warm, concurrency, s.pid, s.db, s.settle);
    for (let run = 0; run < runs; run++) {
      // Each side goes first in turn: none is always the one measured right after another's burst.
      const order = sides.map((_, i) => sides[(i + run) % sides.length] as Side);
      for (const s of order) {
        const r = await drive(s.port, `${sides.indexOf(s)}-${run}`, requests, concurrency, s.pid, s.db, s.settle);
        s.perSecond.push(r.perSecond);
        s.latencies.push(...r.latencies);
        s.bytes += r.bytes;
        s.cpuMs += r.cpuMs;
      }
    }
    await a.proc.stop();
    await p.proc.stop();
    await t?.proc.stop();
    const total = runs * requests + warm;
    const counts = sides.map((s) => count(s.db));
    if (counts.some((n) => n !== total)) throw new Error(`stored ${counts.join(', ')} of ${total}`);
  } finally {
    await t?.proc.stop();
    await scene.close();
  }
  const side = (s: Side): IngestSide => ({
    perSecond: s.perSecond.map((x) => Math.round(x)),
    p50Ms: round(percentile(s.latencies, 50), 2),
    p99Ms: round(percentile(s.latencies, 99), 2),
    bytesPerRecord: Math.round(s.bytes / (runs * requests)),
    cpuMsPerRecord: round(s.cpuMs / (runs * requests), 3),
  });
  const a2 = side(agent);
  const p2 = side(peer);
  const result: IngestResult = { requests, concurrency, runs, fsyncMs, agent: a2, peer: p2, ratio: paired(agent.perSecond, peer.perSecond), bytesRatio: round(a2.bytesPerRecord / p2.bytesPerRecord, 2) };
  if (thread) {
    result.threadPeer = side(thread);
    result.threadRatio = paired(thread.perSecond, peer.perSecond);
  }
  return result;
}
