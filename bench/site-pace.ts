import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { signBody } from '../agent/http/sign.js';
import { SECRET, webhookScene } from './ingest.js';
import { paired, type Paired } from './lib/paired.js';
import { sample } from './lib/proc.js';
import { vendorFields } from './lib/records.js';
import { sleep } from './lib/spawn.js';
import { slowFsyncEnv } from './lib/slow-fsync.js';
import { median, round } from './lib/stats.js';

export interface SitePaceOptions {
  /** Webhooks per side, one per round (a first one each, not counted, makes the schema). */
  records: number;
  /** Between rounds: a site's webhooks come minutes apart, so each finds every timer of the last one run out. */
  gapMs: number;
  fsyncMs: number;
  shim: string;
}

export interface SitePaceResult {
  records: number;
  gapMs: number;
  fsyncMs: number;
  /** The agent's answer time over the peer's, per record (lower is better). */
  time: Paired;
  agentMs: number;
  peerMs: number;
  /** Bytes each process caused to be written per record, from its request to the next round's. */
  agentBytes: number;
  peerBytes: number;
  bytesRatio: number;
}

async function post(port: number, id: string, i: number): Promise<number> {
  const pool = new Pool(`http://127.0.0.1:${port}`);
  try {
    const body = JSON.stringify(vendorFields(id, i));
    const s = performance.now();
    const res = await pool.request({ path: '/vendor/webhook', method: 'POST', headers: { 'content-type': 'application/json', 'x-vendor-signature': signBody(body, SECRET) }, body });
    await res.body.dump();
    const ms = performance.now() - s;
    if (res.statusCode !== 200) throw new Error(`webhook ${id} answered ${res.statusCode}`);
    return ms;
  } finally {
    await pool.close();
  }
}

/**
 * One webhook at a site's pace: a lone signed record every `gapMs` (a fresh connection each, as
 * the vendor's would be), to the agent and to the one-commit peer in the same round, order
 * alternating, every fsync of both slowed like an SD card's. What the back-to-back rows of the
 * ingest bench cannot see: whatever the agent does once a record is in (its delivered mark, a
 * checkpoint after a quiet spell, a writer thread that ended and starts again) is paid per record
 * here, in answer time and in bytes written.
 */
export async function benchSitePace(o: SitePaceOptions): Promise<SitePaceResult> {
  const env = slowFsyncEnv(o.shim, o.fsyncMs);
  const scene = await webhookScene('bench-pace-', env);
  const { agent: a, peer: p } = scene;
  try {
    const sides = [
      { port: a.port, pid: a.proc.child.pid as number, ms: [] as number[], bytes: [] as number[] },
      { port: p.port, pid: p.proc.pid, ms: [] as number[], bytes: [] as number[] },
    ];
    for (const [i, s] of sides.entries()) await post(s.port, `pace-first-${i}`, 0);
    await sleep(o.gapMs);
    for (let round = 0; round < o.records; round++) {
      const order = round % 2 === 0 ? sides : [...sides].reverse();
      const before = order.map((s) => sample(s.pid).writeBytes);
      for (const s of order) s.ms.push(await post(s.port, `pace-${sides.indexOf(s)}-${round}`, round + 1));
      await sleep(o.gapMs);
      order.forEach((s, i) => s.bytes.push(sample(s.pid).writeBytes - (before[i] as number)));
    }
    const [agent, peer] = sides as [(typeof sides)[0], (typeof sides)[0]];
    const sum = (xs: number[]): number => xs.reduce((t, x) => t + x, 0);
    return {
      records: o.records,
      gapMs: o.gapMs,
      fsyncMs: o.fsyncMs,
      time: paired(agent.ms, peer.ms),
      agentMs: round(median(agent.ms), 1),
      peerMs: round(median(peer.ms), 1),
      agentBytes: Math.round(sum(agent.bytes) / o.records),
      peerBytes: Math.round(sum(peer.bytes) / o.records),
      bytesRatio: round(sum(agent.bytes) / sum(peer.bytes), 2),
    };
  } finally {
    await scene.close();
  }
}
