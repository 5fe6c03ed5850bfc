#!/usr/bin/env node
// Builds the native modules that have no prebuilt binary for the Node runtime that runs this
// script (the project's pinned runtime, node_modules/.bin/node, when run by npm), against that
// runtime's own headers. Run by `npm ci` (postinstall) and by scripts/use-node.sh.
//
// - epoll (onoff's nan addon, gpio.driver: onoff) is tied to one Node ABI. npm would build it
//   against whatever headers the user's npmrc names (often the distro Node's), so its own install
//   script is not allowed (package.json allowScripts) and it is built here instead.
//
// - the gpiod addon (gpio.driver: gpiod) is ours, Node-API: one build serves every Node line.
//
// A module that cannot be built is reported, not fatal: the agent works without it on a machine
// that does not use that GPIO driver, and says loudly at start and in `doctor` when one is missing.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const quiet = process.argv.includes('--quiet');
const say = (text) => process.stderr.write(`native-deps: ${text}\n`);

/** The directory holding include/node for this runtime: the runtime package itself, or /usr. */
function headersDir() {
  const root = dirname(dirname(process.execPath));
  return existsSync(join(root, 'include', 'node', 'node_version.h')) ? root : null;
}

function loads(path) {
  const r = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(path)})`], { cwd: ROOT, encoding: 'utf8' });
  return r.status === 0 ? null : (r.stderr.split('\n').find((l) => /Error|error/.test(l)) ?? 'does not load').trim();
}

function nodeGyp() {
  const npmCli = process.env.npm_execpath;
  const candidates = [
    npmCli && join(dirname(dirname(npmCli)), 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
    '/usr/lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js',
    '/usr/share/nodejs/node-gyp/bin/node-gyp.js',
  ].filter(Boolean);
  return candidates.find((p) => existsSync(p)) ?? null;
}

function buildEpoll() {
  const dir = join(ROOT, 'node_modules', 'epoll');
  if (!existsSync(dir)) return;
  const problem = loads('epoll');
  if (problem === null) {
    if (!quiet) say(`epoll loads under Node ${process.versions.node}`);
    return;
  }
  const gyp = nodeGyp();
  const headers = headersDir();
  if (!gyp || !headers) {
    say(`epoll (onoff) is not built for Node ${process.versions.node}: ${!gyp ? 'node-gyp not found' : 'no Node headers beside this runtime'}; gpio.driver: onoff will not work here (gpiod and sim do)`);
    return;
  }
  const r = spawnSync(process.execPath, [gyp, 'rebuild', `--nodedir=${headers}`, '--loglevel=error'], { cwd: dir, encoding: 'utf8', env: { ...process.env, npm_config_nodedir: headers } });
  const after = r.status === 0 ? loads('epoll') : (r.stderr.trim().split('\n').slice(-3).join(' ') || 'build failed');
  if (after === null) say(`built epoll (onoff) for Node ${process.versions.node}`);
  else say(`epoll (onoff) could not be built for Node ${process.versions.node} (${after}); gpio.driver: onoff will not work here (gpiod and sim do)`);
}

function buildGpiod() {
  const r = spawnSync(process.execPath, [join(ROOT, 'scripts', 'build-gpiod.mjs'), '--host', ...(quiet ? ['--quiet'] : [])], { cwd: ROOT, stdio: 'inherit' });
  if (r.status !== 0) say('the gpiod addon was not built here; gpio.driver: gpiod will not work on this machine (sim and the tests do)');
}

buildEpoll();
buildGpiod();
