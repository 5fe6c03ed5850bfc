import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { Simulator } from '../agent/simulator/simulator.js';
import { startAgent, writeAgentConfig } from './lib/agent-proc.js';
import { startBroker } from './lib/broker.js';
import { loadNow, maxOf, type Paired } from './lib/paired.js';
import { freePort } from './lib/ports.js';
import { slowFsyncEnv } from './lib/slow-fsync.js';
import { BENCH_DIR, sleep, spawnNode } from './lib/spawn.js';
import { median, percentile, round } from './lib/stats.js';
import { bigDatabase, syncFile } from './startup.js';

export interface BacklogRound {
  /** Seconds the probes ran: at least the configured seconds, and past the end of the first prune. */
  windowSeconds: number;
  probes: number;
  /** Latency of a GET /healthz sent as soon as the previous one was answered: any event-loop block shows in it. */
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** The empty server's longest answer in the same run: the machine's own stalls. */
  controlMaxMs: number;
  /** The agent's longest answer less the control's longest in the same second: the block that is the agent's. */
  excessMs: number;
  /** Records delivered meanwhile, from the agent's own figures. */
  deliveredPerSecond: number;
  /** Expired records the first retention prune deleted (it ended within the window). */
  pruned: number;
  load: number;
}

export interface BacklogResult {
  /** Undelivered records, and as many delivered ones past retention. */
  rows: number;
  outageMs: number;
  fsyncMs: number;
  rounds: BacklogRound[];
  /** The agent's block (less the control's) per round: median, spread and round count. */
  excess: Paired;
}

interface Probe {
  at: number;
  ms: number;
}

/** GET /healthz one at a time while `going()`. */
async function probe(pool: Pool, going: () => boolean): Promise<Probe[]> {
  const out: Probe[] = [];
  while (going()) {
    const s = performance.now();
    const r = await pool.request({ path: '/healthz', method: 'GET' });
    await r.body.dump();
    out.push({ at: s, ms: performance.now() - s });
  }
  return out;
}

/** Per second of the run, the agent's slowest answer less the control's slowest; the largest of those. */
function excess(agent: Probe[], control: Probe[], t0: number): number {
  const worst = (ps: Probe[]): Map<number, number> => {
    const m = new Map<number, number>();
    for (const p of ps) {
      const sec = Math.floor((p.at - t0) / 1000);
      m.set(sec, Math.max(m.get(sec) ?? 0, p.ms));
    }
    return m;
  };
  const a = worst(agent);
  const c = worst(control);
  let e = 0;
  for (const [sec, ms] of a) e = Math.max(e, ms - (c.get(sec) ?? 0));
  return e;
}

/** How long a round may run while waiting for the first prune to end. */
const MAX_WINDOW_SECONDS = 240;
/** Probing goes on this long after the prune has reported, to see the loop after it too. */
const AFTER_PRUNE_MS = 3_000;
const PRUNE_LINE = /"pruned":(\d+)[^\n]*"pruned delivered transactions"|"msg":"pruning failed"/;

/**
 * A site back from a long outage with a full history: 1M records waiting and 1M delivered long
 * ago (past retention), the broker away when the agent starts and back `outageMs` later. /healthz is
 * asked again and again, one request at a time, of the agent and of an empty server (the control)
 * at once, for at least `seconds` and until the first retention prune (30 s after start) has
 * deleted every expired record and a little after: an answer late at the agent and not at the
 * control is the agent's event loop blocked (a stats query, a big read, a prune, a checkpoint). The
 * goal is no block over 50 ms, also with a slow fsync. `rounds` runs, each on a fresh copy of one
 * database built once; the figure is the median round's, with the spread beside it.
 */
export async function benchBacklog(o: { rows?: number; seconds?: number; outageMs?: number; fsyncMs?: number; shim?: string; rounds?: number } = {}): Promise<BacklogResult> {
  const rows = o.rows ?? 1_000_000;
  const outageMs = o.outageMs ?? 5_000;
  const fsyncMs = o.fsyncMs ?? 0;
  const dir = mkdtempSync(join(tmpdir(), 'bench-backlog-'));
  const built = join(dir, 'built.db');
  const out: BacklogRound[] = [];
  try {
    bigDatabase(built, rows, true);
    for (let i = 0; i < (o.rounds ?? 3); i++) {
      const db = join(dir, 'agent.db');
      for (const f of [db, `${db}-wal`, `${db}-shm`]) rmSync(f, { force: true });
      copyFileSync(built, db);
      syncFile(db);
      out.push(await backlogRound(dir, db, { seconds: o.seconds ?? 45, outageMs, fsyncMs, shim: o.shim }));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const excesses = out.map((r) => r.excessMs);
  return {
    rows,
    outageMs,
    fsyncMs,
    rounds: out,
    excess: { median: round(median(excesses), 1), min: round(Math.min(...excesses), 1), max: round(Math.max(...excesses), 1), rounds: out.length, load: loadNow() },
  };
}

async function backlogRound(dir: string, db: string, o: { seconds: number; outageMs: number; fsyncMs: number; shim: string | undefined }): Promise<BacklogRound> {
  const env = o.shim ? slowFsyncEnv(o.shim, o.fsyncMs) : { ...process.env };
  const broker = await startBroker();
  const sim = new Simulator({ apiKey: 'backlog-key', chairs: 4 });
  await sim.start();
  const port = await freePort();
  const config = writeAgentConfig(
    dir,
    `site: {id: backlog}
vendor: {baseUrl: "${sim.url}", apiKey: backlog-key}
webhook: {channelSecret: backlog-secret}
http: {host: 127.0.0.1, port: ${port}}
mqtt: {url: "${broker.url}"}
storage: {path: ${db}, retentionDays: 30}
log: {level: info}
`,
  );
  const controlPort = await freePort();
  const control = spawnNode(join(BENCH_DIR, 'peers', 'empty-server.js'), [String(controlPort)]);
  await control.line((l) => l === 'listening', 'listening');
  await broker.stop();
  const agent = startAgent(config, env);
  // The prune's line, seen on the agent's output as it comes (its kept output is capped).
  let pruned: number | null = null;
  let tail = '';
  agent.child.stdout?.on('data', (d: Buffer) => {
    // Matched before trimming: one chunk may carry the line and more than the kept tail after it.
    const text = tail + d.toString();
    const m = pruned === null ? PRUNE_LINE.exec(text) : null;
    if (m) pruned = m[1] === undefined ? -1 : Number(m[1]);
    tail = text.slice(-4096);
  });
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 1 });
  const controlPool = new Pool(`http://127.0.0.1:${controlPort}`, { connections: 1 });
  try {
    for (let i = 0; ; i++) {
      try {
        const r = await pool.request({ path: '/healthz', method: 'GET' });
        await r.body.dump();
        break;
      } catch {
        if (i > 400) throw new Error(`the agent did not start:\n${agent.output()}`);
        await sleep(25);
      }
    }
    const pending = async (): Promise<number> => {
      const r = await pool.request({ path: '/api/status', method: 'GET' });
      const body = (await r.body.json()) as { backlog: { pending: number } };
      return body.backlog.pending;
    };
    const pendingBefore = await pending();
    const t0 = performance.now();
    const minUntil = t0 + o.seconds * 1000;
    const cap = t0 + MAX_WINDOW_SECONDS * 1000;
    let prunedAt: number | null = null;
    const going = (): boolean => {
      const now = performance.now();
      if (pruned !== null) prunedAt ??= now;
      return now < cap && (now < minUntil || prunedAt === null || now < prunedAt + AFTER_PRUNE_MS);
    };
    const back = sleep(o.outageMs).then(() => broker.restart());
    const [agentProbes, controlProbes] = await Promise.all([probe(pool, going), probe(controlPool, going)]);
    await back;
    const windowMs = performance.now() - t0;
    const sent = pendingBefore - (await pending());
    if (pruned === null) throw new Error(`the first prune did not end within ${MAX_WINDOW_SECONDS} s`);
    if (pruned < 0) throw new Error(`the first prune failed:\n${tail}`);
    const latencies = agentProbes.map((p) => p.ms);
    return {
      windowSeconds: round(windowMs / 1000, 1),
      probes: latencies.length,
      p50Ms: round(percentile(latencies, 50), 2),
      p99Ms: round(percentile(latencies, 99), 2),
      maxMs: round(maxOf(latencies), 1),
      controlMaxMs: round(maxOf(controlProbes.map((p) => p.ms)), 1),
      excessMs: round(excess(agentProbes, controlProbes, t0), 1),
      deliveredPerSecond: Math.round(sent / ((windowMs - o.outageMs) / 1000)),
      pruned,
      load: loadNow(),
    };
  } finally {
    await pool.close();
    await controlPool.close();
    await agent.stop();
    await control.stop();
    await sim.close();
    await broker.stop();
  }
}
