import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let found: { root: string; version: string } | null | undefined;

/** The folder of the nearest package.json named chair-agent above this module (source, dist, or the installed app/). */
export function packageRoot(): string | null {
  if (found !== undefined) return found?.root ?? null;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'chair-agent' && pkg.version) {
        found = { root: dir, version: pkg.version };
        return dir;
      }
    } catch {
      // not here; look one level up
    }
    dir = dirname(dir);
  }
  found = null;
  return null;
}

/** The package version. */
export function agentVersion(): string {
  packageRoot();
  return found?.version ?? '0.0.0';
}
