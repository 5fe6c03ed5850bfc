// The config worker's work (config-worker.ts is its entry): loads and validates the config,
// posts the result, ends.
import { parentPort, workerData } from 'node:worker_threads';
import { errorMessage } from '../platform/errors.js';
import { ConfigError, loadConfig, type ConfigSources } from './load.js';

const { path, sources } = workerData as { path: string; sources: ConfigSources };
try {
  parentPort?.postMessage({ loaded: loadConfig(path, sources) });
} catch (err) {
  parentPort?.postMessage(err instanceof ConfigError ? { configError: { code: err.code, problems: err.problems } } : { error: errorMessage(err) });
}
