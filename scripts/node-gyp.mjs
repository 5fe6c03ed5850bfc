// Where node-gyp is: the copy bundled with the npm running this script, else a global npm's or
// Debian's. An npm that is not the global one (unpacked anywhere, or a version manager's) is not
// under `npm root -g`, so the npm that started us is asked first, through npm_execpath.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

const IN_NPM = ['node_modules', 'node-gyp', 'bin', 'node-gyp.js'];

function globalNpm() {
  const r = spawnSync('npm', ['root', '-g'], { encoding: 'utf8' });
  return r.status === 0 && r.stdout.trim() ? join(r.stdout.trim(), 'npm', ...IN_NPM) : null;
}

/** node-gyp's entry script, or null when none is found. Asks `npm root -g` only if needed. */
export function findNodeGyp(env = process.env) {
  const candidates = [
    () => (env.npm_execpath ? join(dirname(dirname(env.npm_execpath)), ...IN_NPM) : null),
    globalNpm,
    () => join('/usr/lib/node_modules/npm', ...IN_NPM),
    () => '/usr/share/nodejs/node-gyp/bin/node-gyp.js',
  ];
  for (const candidate of candidates) {
    const path = candidate();
    if (path && existsSync(path)) return path;
  }
  return null;
}
