import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { Simulator } from '../agent/simulator/simulator.js';
import { startAgent, writeAgentConfig } from './lib/agent-proc.js';
import { startBroker } from './lib/broker.js';
import { freePort } from './lib/ports.js';
import { sleep } from './lib/spawn.js';
import { percentile, round } from './lib/stats.js';
import { bigDatabase } from './startup.js';

export interface BacklogResult {
  rows: number;
  seconds: number;
  probes: number;
  /** Latency of a GET /healthz sent as soon as the previous one was answered: any event-loop block shows in it. */
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Records delivered meanwhile, read from bridge/info's figures at the end. */
  deliveredPerSecond: number;
}

/**
 * A site back from a long outage: 1M records waiting in the outbox, the broker up. While the
 * agent flushes them, /healthz is asked again and again, one request at a time, for `seconds`:
 * a request answered late means the event loop was blocked (a stats query, a big read, a
 * checkpoint). The goal is no block over 50 ms.
 */
export async function benchBacklog(rows = 1_000_000, seconds = 20): Promise<BacklogResult> {
  const broker = await startBroker();
  const sim = new Simulator({ apiKey: 'backlog-key', chairs: 4 });
  await sim.start();
  const dir = mkdtempSync(join(tmpdir(), 'bench-backlog-'));
  const db = join(dir, 'agent.db');
  bigDatabase(db, rows, false);
  const port = await freePort();
  const config = writeAgentConfig(
    dir,
    `site: {id: backlog}
vendor: {baseUrl: "${sim.url}", apiKey: backlog-key}
webhook: {channelSecret: backlog-secret}
http: {host: 127.0.0.1, port: ${port}}
mqtt: {url: "${broker.url}"}
storage: {path: ${db}}
log: {level: warn}
`,
  );
  const agent = startAgent(config);
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 1 });
  const latencies: number[] = [];
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
    const outbox = async (): Promise<number> => {
      const r = await pool.request({ path: '/api/status', method: 'GET' });
      const body = (await r.body.json()) as { backlog: { delivered: number } };
      return body.backlog.delivered;
    };
    const before = await outbox();
    const t0 = performance.now();
    while (performance.now() - t0 < seconds * 1000) {
      const s = performance.now();
      const r = await pool.request({ path: '/healthz', method: 'GET' });
      await r.body.dump();
      latencies.push(performance.now() - s);
      if (process.env["BACKLOG_TRACE"] && performance.now() - s > 30) process.stderr.write(`slow probe at ${Math.round(s - t0)} ms: ${Math.round(performance.now() - s)} ms\n`);
    }
    const delivered = (await outbox()) - before;
    return {
      rows,
      seconds,
      probes: latencies.length,
      p50Ms: round(percentile(latencies, 50), 2),
      p99Ms: round(percentile(latencies, 99), 2),
      maxMs: round(Math.max(...latencies), 1),
      deliveredPerSecond: Math.round(delivered / ((performance.now() - t0) / 1000)),
    };
  } finally {
    await pool.close();
    await agent.stop();
    await sim.close();
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
