import { spawn, spawnSync } from 'node:child_process';
import { closeSync, fsyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { buildNative } from './lib/native.js';
import { median, round } from './lib/stats.js';

/** A thread asleep `sleepMs` woken through a pipe and answering back: the median round trip, µs. */
export interface WakeCost {
  sleepMs: number;
  /** Both threads on one CPU. */
  sameCpuUs: number;
  /** Each on a CPU of its own: the woken one's CPU was idle too. */
  otherCpuUs: number;
}

/** The fsyncs the one-client ingest rows slow every commit by (bench/native/slow-fsync.c). */
const WAKE_SLEEPS_MS = [2, 10];
const WAKE_SAMPLES = 300;

/**
 * What waking a thread that slept through an fsync costs here (bench/native/wake-latency.c), on
 * the same CPU and on another: a lone webhook pays it for each hand-off to the writer thread and
 * back. Under a hypervisor an idle virtual CPU is slow to wake. `missing` says
 * why it was not measured (no compiler, one CPU).
 */
export function wakeCosts(): WakeCost[] | { missing: string } {
  if (availableParallelism() < 2) return { missing: 'one CPU: there is no other CPU to wake a thread on' };
  const built = buildNative('wake-latency', 'program', 'the wake-latency probe');
  if ('missing' in built) return built;
  const trip = (sleepMs: number, where: 'same' | 'other'): number => {
    const r = spawnSync(built.path, [String(sleepMs * 1000), String(WAKE_SAMPLES), where], { encoding: 'utf8' });
    const us = Number(r.stdout.trim());
    if (r.status !== 0 || !Number.isFinite(us)) throw new Error(`wake-latency failed: ${r.stderr.trim()}`);
    return us;
  };
  return WAKE_SLEEPS_MS.map((sleepMs) => ({ sleepMs, sameCpuUs: trip(sleepMs, 'same'), otherCpuUs: trip(sleepMs, 'other') }));
}

export interface MachineLimits {
  fsyncPerSecond: number;
  sqliteFullCommitsPerSecond: number;
  emptyNodeStartMs: number;
  emptyNodeRssMb: number;
  wake: WakeCost[] | { missing: string };
}

/** What this machine can do at best: the ceilings the agent's figures are set against. */
export async function machineLimits(): Promise<MachineLimits> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-limits-'));
  try {
    const fd = openSync(join(dir, 'f'), 'w');
    const block = Buffer.alloc(512, 1);
    let t0 = performance.now();
    for (let i = 0; i < 2000; i++) {
      writeSync(fd, block);
      fsyncSync(fd);
    }
    const fsyncPerSecond = 2000 / ((performance.now() - t0) / 1000);
    closeSync(fd);

    const db = new Database(join(dir, 'x.db'));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    const ins = db.prepare('INSERT INTO t (v) VALUES (?)');
    t0 = performance.now();
    for (let i = 0; i < 2000; i++) ins.run('x'.repeat(300));
    const sqliteFullCommitsPerSecond = 2000 / ((performance.now() - t0) / 1000);
    db.close();

    const starts: number[] = [];
    let rss = 0;
    for (let i = 0; i < 7; i++) {
      const s = performance.now();
      const out = await new Promise<string>((resolve) => {
        const c = spawn(process.execPath, ['-e', 'process.stdout.write(String(process.memoryUsage().rss))']);
        let text = '';
        c.stdout.on('data', (d: Buffer) => (text += d.toString()));
        c.once('exit', () => resolve(text));
      });
      starts.push(performance.now() - s);
      rss = Number(out) / 2 ** 20;
    }
    return {
      fsyncPerSecond: Math.round(fsyncPerSecond),
      sqliteFullCommitsPerSecond: Math.round(sqliteFullCommitsPerSecond),
      emptyNodeStartMs: round(median(starts), 0),
      emptyNodeRssMb: round(rss, 1),
      wake: wakeCosts(),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
