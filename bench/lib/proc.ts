import { readdirSync, readFileSync } from 'node:fs';

export interface ProcSample {
  at: number;
  /** user + system CPU, seconds. */
  cpu: number;
  rssMb: number;
  /** Resident anonymous memory (heap, stacks): what the kernel cannot reclaim without swap. */
  rssAnonMb: number;
  /** Resident file-backed pages (the binary, ICU data, libraries): clean, reclaimable under pressure. */
  rssFileMb: number;
  /** Bytes this process caused to be written to storage. */
  writeBytes: number;
}

const TICKS = 100; // CLK_TCK on Linux

/** CPU, RSS and disk writes of a process, from /proc. */
export function sample(pid: number): ProcSample {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const cpu = (Number(fields[11]) + Number(fields[12])) / TICKS;
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string): number => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0);
  const io = /write_bytes: (\d+)/.exec(readFileSync(`/proc/${pid}/io`, 'utf8'));
  return { at: Date.now(), cpu, rssMb: kb('VmRSS') / 1024, rssAnonMb: kb('RssAnon') / 1024, rssFileMb: kb('RssFile') / 1024, writeBytes: Number(io?.[1] ?? 0) };
}

/** A process's CPU at one moment: each live thread's in nanoseconds, and the tick-granular total. */
export interface CpuSnapshot {
  threads: Map<string, number>;
  /** Every thread listed was read (a kernel without schedstat, or a thread ending meanwhile, makes it false). */
  complete: boolean;
  ticksSeconds: number;
}

/**
 * Each thread's time on a CPU (/proc/PID/task/TID/schedstat, nanoseconds) beside the process's
 * utime + stime (10 ms ticks, exited threads included). A flush of 10,000 records takes about
 * 250 ms of CPU, so ticks alone put up to 4% of error on each side of a ratio.
 */
export function cpuSnapshot(pid: number): CpuSnapshot {
  const threads = new Map<string, number>();
  let complete = true;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      threads.set(tid, Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]));
    } catch {
      complete = false;
    }
  }
  return { threads, complete, ticksSeconds: sample(pid).cpu };
}

/**
 * CPU milliseconds between two snapshots: summed over threads when both are complete and every
 * thread of the first is still there (threads born since count whole), else from the ticks, since
 * a thread that ended took its nanoseconds with it.
 */
export function cpuMsBetween(before: CpuSnapshot, after: CpuSnapshot): number {
  const ticks = (after.ticksSeconds - before.ticksSeconds) * 1000;
  if (!before.complete || !after.complete) return ticks;
  let ns = 0;
  for (const [tid, then] of before.threads) {
    const now = after.threads.get(tid);
    if (now === undefined) return ticks;
    ns += now - then;
  }
  for (const [tid, now] of after.threads) if (!before.threads.has(tid)) ns += now;
  return ns / 1e6;
}
