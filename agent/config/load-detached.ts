import { existsSync } from 'node:fs';
import * as nodeModule from 'node:module';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { deepFreeze } from '../core/deep-freeze.js';
import { ConfigError, type ConfigErrorCode } from './config-error.js';
import type { ConfigSources, LoadedConfig } from './load.js';

/** Where the worker's entry is: beside the bundle's main.js, or beside this module (tsc's layout). */
function workerEntry(): string | null {
  for (const rel of ['../config-worker.js', './config-worker.js']) {
    const file = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(file)) return file;
  }
  return null;
}

/**
 * loadConfig() for the long-running agent, on a short-lived worker thread: the YAML parser, zod
 * and the schema (some 5 MB of heap that validation needs once) live and die with that thread,
 * and the agent keeps only the validated, frozen config. Where there is no built worker entry
 * (tests run the sources), it loads in this thread.
 */
export async function loadConfigDetached(path: string, sources: ConfigSources): Promise<LoadedConfig> {
  const entry = workerEntry();
  if (!entry) return (await import('./load.js')).loadConfig(path, sources);
  // getCompileCacheDir() names the cache's subdirectory for this Node version; enabling the cache
  // with it would put the worker's code one version directory deeper. Its parent is the cache.
  const inUse = (nodeModule as { getCompileCacheDir?: () => string | undefined }).getCompileCacheDir?.();
  const compileCacheDir = inUse === undefined ? undefined : dirname(inUse);
  const worker = new Worker(entry, {
    workerData: { path, sources: { env: { ...sources.env }, credentialsDirectory: sources.credentialsDirectory }, compileCacheDir },
  });
  try {
    const reply = await new Promise<{ loaded?: LoadedConfig; configError?: { code: ConfigErrorCode; problems: string[] }; error?: string }>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`the configuration loader ended (${code}) without an answer`)));
    });
    if (reply.configError) throw new ConfigError(reply.configError.code, reply.configError.problems);
    if (!reply.loaded) throw new Error(reply.error ?? 'the configuration loader gave no answer');
    return deepFreeze(reply.loaded);
  } finally {
    void worker.terminate();
  }
}
