import { setImmediate as turn } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import type { HandoffReply, HandoffRequest } from './handoff-worker.js';
import { loadNow } from './lib/paired.js';
import { median, round } from './lib/stats.js';

export interface HandoffCase {
  /** How long the work takes (the fsync a lone webhook's commit waits for). */
  workMs: number;
  /** Per round: the median round trip through the worker thread less the median of the same wait on the main thread, ms. */
  extraMs: number[];
  /** The median of the rounds, and their spread. */
  medianMs: number;
  minMs: number;
  maxMs: number;
  load: number;
}

// Made once: allocating it inside the timed wait would add to the inline side and understate the hand-off.
const sleepCell = new Int32Array(new SharedArrayBuffer(4));
const waitHere = (ms: number): void => {
  if (ms > 0) Atomics.wait(sleepCell, 0, 0, ms);
};
const elapsedMs = (since: bigint): number => Number(process.hrtime.bigint() - since) / 1e6;

/**
 * What a hand-off to a worker thread and back costs on this machine: the price a webhook that
 * arrives alone pays for its commit running on the writer thread rather than on the event loop
 * (docs/ARCHITECTURE.md). The main thread posts to a worker that waits `workMs` (standing in for
 * the fsync) and answers, against the same wait made on the main thread itself, as a receiver
 * that commits on its event loop does. Both sides sleep in the kernel meanwhile, so what the
 * machine charges for waking a thread that has been asleep that long is in the figure. Samples
 * alternate; each round's figure is the difference of its two medians.
 */
export async function benchHandoff(workMs: readonly number[] = [0, 2, 10], rounds = 5, samples = 100): Promise<HandoffCase[]> {
  const worker = new Worker(new URL('./handoff-worker.js', import.meta.url));
  const replies = new Map<number, () => void>();
  worker.on('message', (m: HandoffReply) => replies.get(m.id)?.());
  let nextId = 1;
  const viaThread = (ms: number): Promise<number> => {
    const id = nextId++;
    const t = process.hrtime.bigint();
    return new Promise<number>((resolve) => {
      replies.set(id, () => {
        replies.delete(id);
        resolve(elapsedMs(t) - ms);
      });
      worker.postMessage({ id, workMs: ms } satisfies HandoffRequest);
    });
  };
  try {
    await viaThread(0);
    const out: HandoffCase[] = [];
    for (const ms of workMs) {
      const extraMs: number[] = [];
      for (let r = 0; r < rounds; r++) {
        const inline: number[] = [];
        const threaded: number[] = [];
        for (let i = 0; i < samples; i++) {
          // A turn of the event loop between samples, as between two requests.
          await turn();
          const t = process.hrtime.bigint();
          waitHere(ms);
          inline.push(elapsedMs(t) - ms);
          await turn();
          threaded.push(await viaThread(ms));
        }
        extraMs.push(round(median(threaded) - median(inline), 3));
      }
      out.push({ workMs: ms, extraMs, medianMs: round(median(extraMs), 3), minMs: Math.min(...extraMs), maxMs: Math.max(...extraMs), load: loadNow() });
    }
    return out;
  } finally {
    await worker.terminate();
  }
}
