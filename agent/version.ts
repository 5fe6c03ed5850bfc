import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let cached: string | undefined;

/** The package version, found from the nearest package.json named chair-agent (source or dist). */
export function agentVersion(): string {
  if (cached) return cached;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'chair-agent' && pkg.version) return (cached = pkg.version);
    } catch {
      // not here; look one level up
    }
    dir = dirname(dir);
  }
  return (cached = '0.0.0');
}
