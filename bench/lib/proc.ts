import { readFileSync } from 'node:fs';

export interface ProcSample {
  at: number;
  /** user + system CPU, seconds. */
  cpu: number;
  rssMb: number;
  /** Bytes this process caused to be written to storage. */
  writeBytes: number;
}

const TICKS = 100; // CLK_TCK on Linux

/** CPU, RSS and disk writes of a process, from /proc. */
export function sample(pid: number): ProcSample {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const cpu = (Number(fields[11]) + Number(fields[12])) / TICKS;
  const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  const io = /write_bytes: (\d+)/.exec(readFileSync(`/proc/${pid}/io`, 'utf8'));
  return { at: Date.now(), cpu, rssMb: Number(rss?.[1] ?? 0) / 1024, writeBytes: Number(io?.[1] ?? 0) };
}
