// A signed apt repository of chair-agent packages, written with Debian's reprepro, for a fleet to
// upgrade from with apt-get (docs/FLEET.md, "The fleet's apt repository"). Two suites: `canary`
// for the boxes that take a build first, `stable` for the rest; a build is promoted from canary
// to stable by publishing the same .deb to stable. Signed with the chain's key (gpg, whose
// GNUPGHOME holds it); the public key is written beside the repository as chair-agent.asc.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const SUITES = ['canary', 'stable'];

function run(cmd, args, env = process.env) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', env });
  if (r.error) throw new Error(`${cmd}: ${r.error.message} (apt install reprepro gnupg)`);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed:\n${(r.stderr || r.stdout).trim().split('\n').slice(-10).join('\n')}`);
  return r.stdout;
}

/** Publishes the .debs to `suite` of the repository in `dir` (created on first use), signed with `signWith`. */
export function publishAptRepo({ dir, suite, debs, signWith }) {
  if (!SUITES.includes(suite)) throw new Error(`suite must be one of ${SUITES.join(', ')}`);
  if (!signWith) throw new Error('a signing key is needed (--sign-with <key id or fingerprint>): an unsigned repository is refused by apt');
  mkdirSync(join(dir, 'conf'), { recursive: true });
  writeFileSync(
    join(dir, 'conf', 'distributions'),
    SUITES.map((s) => [`Origin: chair-agent`, `Label: chair-agent`, `Suite: ${s}`, `Codename: ${s}`, 'Architectures: arm64 amd64', 'Components: main', `Description: chair-agent, ${s} channel`, `SignWith: ${signWith}`, ''].join('\n')).join('\n'),
  );
  writeFileSync(join(dir, 'conf', 'options'), 'verbose\n');
  for (const deb of debs) {
    if (!existsSync(deb)) throw new Error(`${deb} does not exist: npm run package first`);
    run('reprepro', ['-b', dir, '--export=force', 'includedeb', suite, deb]);
  }
  writeFileSync(join(dir, 'chair-agent.asc'), run('gpg', ['--batch', '--armor', '--export', signWith]));
  return join(dir, 'chair-agent.asc');
}
