// The version of a build: package.json's semver plus, in a git checkout, "+<commits>.g<hash>"
// (".dirty" when tracked files differ from the commit). The commit count orders builds of one
// line of history for dpkg and apt (0.2.0+131.g1a2b3c4d5e < 0.2.0+132.g...), the hash names the
// commit; semver ignores build metadata, so 0.2.0 stays the release. Without git (a source
// tarball) it is package.json's version alone.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

function git(root, args) {
  const r = spawnSync('git', args, { cwd: root, encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

export function buildVersion(root) {
  const base = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version;
  if (process.env.CHAIR_AGENT_VERSION) return process.env.CHAIR_AGENT_VERSION;
  const count = git(root, ['rev-list', '--count', 'HEAD']);
  const hash = git(root, ['rev-parse', '--short=10', 'HEAD']);
  if (!count || !hash) return base;
  const dirty = git(root, ['status', '--porcelain', '--untracked-files=no']);
  return `${base}+${count}.g${hash}${dirty ? '.dirty' : ''}`;
}
