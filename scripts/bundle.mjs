// The agent's entry as one bundle (with a chunk per lazily loaded command), so a start reads a
// few files instead of some 600 modules: start-up time and memory on a Pi. Run by `npm run
// build` after tsc; it replaces dist/agent/main.js. The rest of dist/agent stays as tsc wrote it
// (tests and benchmarks import those modules). Native and optional modules stay external: they
// are loaded from node_modules as before.
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist', 'agent');
rmSync(join(out, 'chunks'), { recursive: true, force: true });
await build({
  // The config loader runs once, on a worker thread that ends (config/load-detached.ts); the
  // outbox's writer thread comes and goes with writes (store/thread-writer.ts).
  entryPoints: { main: join(out, 'main.js'), 'config-worker': join(out, 'config', 'config-worker.js'), 'store-writer': join(out, 'store', 'store-writer.js') },
  outdir: out,
  chunkNames: 'chunks/[name]-[hash]',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node22',
  // BUNDLE_READABLE=1 keeps names and whitespace (for reading CPU profiles).
  minify: process.env['BUNDLE_READABLE'] !== '1',
  // No keepNames: its __name() call for every function costs some 70 ms of start-up CPU and about a
  // MB of heap. Errors name themselves (AgentError.name); stack frames show the minified names.
  keepNames: false,
  legalComments: 'none',
  allowOverwrite: true,
  logLevel: 'warning',
  // mqtt-packet's debug() calls, several per packet, cost allocations even when off (scripts/debug-off.cjs).
  alias: {
    debug: join(root, 'scripts', 'debug-off.cjs'),
    // mqtt.js's WebSocket and SOCKS transports (scripts/mqtt-transport-absent.cjs).
    ws: join(root, 'scripts', 'mqtt-transport-absent.cjs'),
    socks: join(root, 'scripts', 'mqtt-transport-absent.cjs'),
  },
  // mqtt.js takes MQTTJS_SOCKS_PROXY from the environment where its socksProxy option is undefined,
  // and the stub above has no SOCKS client for it: every broker connection failed with it set.
  // mqtt.proxy is the one way to a proxy. (Set to '', the option sends mqtts:// to the stub too.)
  define: { 'process.env.MQTTJS_SOCKS_PROXY': 'undefined' },
  // Native addons (prebuilt per architecture), optional drivers and dev-only modules.
  external: ['better-sqlite3', 'onoff', 'epoll', 'pino-pretty', 'aedes'],
  // Bundled CommonJS modules call require() for Node's built-ins.
  banner: { js: "import { createRequire as __chairAgentRequire } from 'node:module'; const require = __chairAgentRequire(import.meta.url);" },
});
