// Where node-gyp is: the copy bundled with the npm running this script, else a global npm's or
// Debian's. npm 12 run from its own folder (npx, a version manager, a tarball unpacked anywhere)
// is not under `npm root -g`, so the npm that started us is asked first, through npm_execpath.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

const IN_NPM = ['node_modules', 'node-gyp', 'bin', 'node-gyp.js'];

/** node-gyp's entry script, or null when none is found. */
export function findNodeGyp(env = process.env) {
  const candidates = [];
  if (env.npm_execpath) candidates.push(join(dirname(dirname(env.npm_execpath)), ...IN_NPM));
  const globalRoot = spawnSync('npm', ['root', '-g'], { encoding: 'utf8' });
  if (globalRoot.status === 0 && globalRoot.stdout.trim()) candidates.push(join(globalRoot.stdout.trim(), 'npm', ...IN_NPM));
  candidates.push(join('/usr/lib/node_modules/npm', ...IN_NPM), '/usr/share/nodejs/node-gyp/bin/node-gyp.js');
  return candidates.find((p) => existsSync(p)) ?? null;
}
