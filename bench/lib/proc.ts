import { readFileSync } from 'node:fs';

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
