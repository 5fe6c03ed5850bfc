import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { BENCH_DIR } from './spawn.js';

/**
 * A bench helper written in C (bench/native/NAME.c), built with the system's C compiler into
 * dist/bench/native the first time it is asked for (and again when its source is newer); where
 * there is no compiler, or it fails, `missing` says why and the rows that need it are skipped.
 */
export function buildNative(name: string, kind: 'shared' | 'program', what: string): { path: string } | { missing: string } {
  // The source sits beside the TypeScript sources (dist/bench is two levels below the repository).
  const source = join(BENCH_DIR, '..', '..', 'bench', 'native', `${name}.c`);
  const out = join(BENCH_DIR, 'native', kind === 'shared' ? `${name}.so` : name);
  if (existsSync(out) && existsSync(source) && statSync(out).mtimeMs >= statSync(source).mtimeMs) return { path: out };
  mkdirSync(join(BENCH_DIR, 'native'), { recursive: true });
  const args = kind === 'shared' ? ['-shared', '-fPIC', '-O2', '-o', out, source, '-ldl'] : ['-O2', '-pthread', '-o', out, source];
  const r = spawnSync('cc', args, { encoding: 'utf8' });
  if (r.error) return { missing: `no C compiler (cc) to build ${what}` };
  if (r.status !== 0) return { missing: `${what} did not build: ${r.stderr.trim().slice(0, 300)}` };
  return { path: out };
}
