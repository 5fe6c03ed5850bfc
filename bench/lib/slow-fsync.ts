import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { BENCH_DIR } from './spawn.js';

/** The shim's source, beside the TypeScript sources (dist/bench is two levels below the repository). */
const SOURCE = join(BENCH_DIR, '..', '..', 'bench', 'native', 'slow-fsync.c');
const OUT = join(BENCH_DIR, 'native', 'slow-fsync.so');

/**
 * The LD_PRELOAD shim that makes every fsync wait like an SD card's (bench/native/slow-fsync.c),
 * built with the system's C compiler; null (and why) where there is none.
 */
export function slowFsyncShim(): { path: string } | { missing: string } {
  if (existsSync(OUT) && existsSync(SOURCE) && statSync(OUT).mtimeMs >= statSync(SOURCE).mtimeMs) return { path: OUT };
  mkdirSync(join(BENCH_DIR, 'native'), { recursive: true });
  const r = spawnSync('cc', ['-shared', '-fPIC', '-O2', '-o', OUT, SOURCE, '-ldl'], { encoding: 'utf8' });
  if (r.error) return { missing: 'no C compiler (cc) to build the fsync-delay shim: the SD-card rows are skipped' };
  if (r.status !== 0) return { missing: `the fsync-delay shim did not build: ${r.stderr.trim().slice(0, 300)}` };
  return { path: OUT };
}

/** The environment of a process whose fsyncs take `ms` each (none added for 0). */
export function slowFsyncEnv(shim: string, ms: number): NodeJS.ProcessEnv {
  if (ms <= 0) return { ...process.env };
  const preload = [shim, process.env['LD_PRELOAD']].filter(Boolean).join(' ');
  return { ...process.env, LD_PRELOAD: preload, SLOW_FSYNC_MS: String(ms) };
}
