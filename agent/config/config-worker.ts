// A worker thread's entry. A new thread starts with no compile cache of its own: it takes the
// main thread's (main.ts enables it) before loading the YAML parser, zod and the schema, which
// compiled afresh were some 20 ms of every start on the way to the first chair state.
import * as nodeModule from 'node:module';
import { workerData } from 'node:worker_threads';

const dir = (workerData as { compileCacheDir?: string }).compileCacheDir;
const enable = (nodeModule as { enableCompileCache?: (dir?: string) => unknown }).enableCompileCache;
if (dir !== undefined) {
  try {
    enable?.(dir);
  } catch {
    // a cache that cannot be had only costs start-up time
  }
}
await import('./validate-on-worker.js');
