#!/usr/bin/env node
// Builds the native parts that have no prebuilt binary in node_modules for the Node runtime that
// runs this script (the project's pinned runtime, via sh scripts/node), against that runtime's
// own headers. Run by `npm run build` and by scripts/use-node.sh.
//
// - the gpiod addon (gpio.driver: gpiod) is ours, Node-API: one build serves every Node line, so
//   it is built once and again only when its source changes.
// - epoll (onoff's nan addon, gpio.driver: onoff) is tied to one Node ABI: built when it does not
//   load under this runtime. npm never runs its install script (.npmrc: ignore-scripts).
//
// Neither is needed for the quick start, the tests or gpio.driver: sim. What cannot be built here
// (no C compiler, the usual case on a fresh machine) is said in one line, and the build goes on;
// the agent says so again, loudly, if a config asks for that driver. The packages carry both
// prebuilt for their CPU: nothing compiles on a Pi.
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findNodeGyp } from './node-gyp.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const quiet = process.argv.includes('--quiet');
const say = (text) => process.stderr.write(`native: ${text}\n`);

/** The directory holding include/node for this runtime (the runtime package itself), or null. */
function headersDir() {
  const root = dirname(dirname(process.execPath));
  return existsSync(join(root, 'include', 'node', 'node_api.h')) ? root : null;
}

const have = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;

function loads(path) {
  const r = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(path)})`], { cwd: ROOT, encoding: 'utf8' });
  return r.status === 0;
}

/** Returns null when the part is ready, else why it could not be made. */
function gpiod() {
  const out = join(ROOT, 'native', 'prebuilds', `linux-${process.arch}`, 'chair_gpiod.node');
  const source = join(ROOT, 'native', 'gpiod', 'chair_gpiod.c');
  if (existsSync(out) && statSync(out).mtimeMs >= statSync(source).mtimeMs) return null;
  if (!have('cc') && !have('gcc')) return 'no C compiler';
  const r = spawnSync(process.execPath, [join(ROOT, 'scripts', 'build-gpiod.mjs'), '--host', '--quiet'], { cwd: ROOT, encoding: 'utf8' });
  if (r.status === 0) return null;
  // The compiler's first error says it best ("fatal error: errno.h: No such file or directory":
  // gcc without libc6-dev); else build-gpiod's own line.
  const lines = r.stderr.trim().split('\n');
  const error = lines.find((l) => /\berror\b/.test(l) && !l.startsWith('build-gpiod:')) ?? lines[0] ?? 'build failed';
  const said = error.replace(/^.*?: (fatal )?error: /, 'compiler: ').trim();
  return /\.h: No such file/.test(said) ? `${said}: sudo apt install libc6-dev` : said;
}

function epoll() {
  const dir = join(ROOT, 'node_modules', 'epoll');
  if (!existsSync(dir)) return null; // onoff is optional, and not installed here
  if (loads('epoll')) return null;
  if (!have('make') || !have('g++')) return 'no C++ compiler';
  const gyp = findNodeGyp();
  const headers = headersDir();
  if (!gyp || !headers) return !gyp ? 'node-gyp not found' : 'no Node headers beside this runtime';
  const r = spawnSync(process.execPath, [gyp, 'rebuild', `--nodedir=${headers}`, '--loglevel=error'], { cwd: dir, encoding: 'utf8', env: { ...process.env, npm_config_nodedir: headers } });
  if (r.status === 0 && loads('epoll')) return null;
  return r.stderr.trim().split('\n').slice(-1)[0] || 'build failed';
}

const skipped = [];
const g = gpiod();
if (g) skipped.push(`the gpiod addon (${g})`);
const e = epoll();
if (e) skipped.push(`onoff's epoll (${e})`);
if (skipped.length > 0) {
  say(`not built on this machine: ${skipped.join(', ')}. Only gpio.driver gpiod/onoff need them; the demo, npm test and gpio.driver: sim do not.`);
} else if (!quiet) {
  say(`native parts ready for Node ${process.versions.node}`);
}
