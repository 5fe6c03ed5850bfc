import { buildNative } from './native.js';

/**
 * The LD_PRELOAD shim that makes every fsync wait like an SD card's (bench/native/slow-fsync.c),
 * built with the system's C compiler; null (and why) where there is none.
 */
export function slowFsyncShim(): { path: string } | { missing: string } {
  const built = buildNative('slow-fsync', 'shared', 'the fsync-delay shim');
  return 'missing' in built ? { missing: `${built.missing}: the SD-card rows are skipped` } : built;
}

/** The environment of a process whose fsyncs take `ms` each (none added for 0). */
export function slowFsyncEnv(shim: string, ms: number): NodeJS.ProcessEnv {
  if (ms <= 0) return { ...process.env };
  const preload = [shim, process.env['LD_PRELOAD']].filter(Boolean).join(' ');
  return { ...process.env, LD_PRELOAD: preload, SLOW_FSYNC_MS: String(ms) };
}
