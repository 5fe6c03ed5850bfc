import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { BENCH_DIR } from './lib/spawn.js';
import { median, round } from './lib/stats.js';

export interface LibraryCost {
  what: string;
  replacedBy: string;
  anonMb: number | null;
  fileMb: number | null;
  missing?: string;
}

const LIBRARIES: [string, string][] = [
  ['intl', 'time/tzif.ts and time/time-zone.ts (the box\'s tz database)'],
  ['node-cron', 'time/cron-next.ts and time/scheduler.ts (node-cron\'s parser is kept)'],
  ['prom-client', 'observe/metrics.ts'],
  ['debug', 'a no-op `debug` in the bundle (scripts/bundle.mjs)'],
];

/** Each library's memory, less an empty probe's, median of `runs` fresh processes. */
export function benchLibraries(runs = 3): LibraryCost[] {
  const probe = (what: string): { anonMb?: number; fileMb?: number; missing?: string } => {
    const r = spawnSync(process.execPath, ['--expose-gc', join(BENCH_DIR, 'lib', 'library-probe.js'), what], { encoding: 'utf8' });
    return JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as { anonMb?: number; fileMb?: number; missing?: string };
  };
  const base = Array.from({ length: runs }, () => probe('none'));
  const baseAnon = median(base.map((b) => b.anonMb ?? 0));
  const baseFile = median(base.map((b) => b.fileMb ?? 0));
  return LIBRARIES.map(([what, replacedBy]) => {
    const rs = Array.from({ length: runs }, () => probe(what));
    const missing = rs.find((x) => x.missing)?.missing;
    if (missing) return { what, replacedBy, anonMb: null, fileMb: null, missing };
    return { what, replacedBy, anonMb: round(median(rs.map((x) => x.anonMb ?? 0)) - baseAnon, 1), fileMb: round(median(rs.map((x) => x.fileMb ?? 0)) - baseFile, 1) };
  });
}
