import { loadavg } from 'node:os';
import { median, round } from './stats.js';

/**
 * A ratio as a claim: the median of per-round ratios (the agent and its peer measured in the same
 * round, one right after the other, order alternating), with the spread and how many rounds, and
 * the machine's load average when it was taken. A noisy machine shows in the spread and the load,
 * not in a single figure.
 */
export interface Paired {
  median: number;
  min: number;
  max: number;
  rounds: number;
  /** 1-minute load average at the end of the measurement. */
  load: number;
}

/** Ratios of agent to peer per round: pass rates (higher is better) or times inverted by the caller. */
export function paired(agent: readonly number[], peer: readonly number[]): Paired {
  if (agent.length !== peer.length || agent.length === 0) throw new Error(`paired rounds differ: ${agent.length} vs ${peer.length}`);
  const ratios = agent.map((a, i) => a / (peer[i] as number));
  return { median: round(median(ratios), 2), min: round(Math.min(...ratios), 2), max: round(Math.max(...ratios), 2), rounds: ratios.length, load: loadNow() };
}

export const loadNow = (): number => round(loadavg()[0] ?? 0, 2);

/** "1.72 (1.16-2.23, 5 rounds, load 1.9)". */
export function describePaired(p: Paired): string {
  return `${p.median} (${p.min}–${p.max}, ${p.rounds} rounds, load ${p.load})`;
}

/** The largest of many numbers (Math.max(...xs) overflows the stack past some 100,000). */
export function maxOf(xs: readonly number[]): number {
  let m = -Infinity;
  for (const x of xs) if (x > m) m = x;
  return m;
}
