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

let built: string | null | undefined;

/**
 * This build's version: package.json's semver plus the commit it was built from
 * (dist/agent/build-info.json, written by npm run build: "0.2.0+131.g1a2b3c4d5e"), else
 * package.json's alone.
 */
export function agentVersion(): string {
  const root = packageRoot();
  if (built === undefined) {
    try {
      const info = JSON.parse(readFileSync(join(root ?? '.', 'dist', 'agent', 'build-info.json'), 'utf8')) as { version?: unknown };
      built = typeof info.version === 'string' && info.version !== '' ? info.version : null;
    } catch {
      built = null;
    }
  }
  return built ?? found?.version ?? '0.0.0';
}

/**
 * The Node.js runtime this process runs on. The packages carry their own, pinned per CPU, so two
 * boxes on one agent version can run different runtimes: a fleet reads which from bridge/info.
 */
export function runtimeFacts(): { node: string; arch: string } {
  return { node: process.versions.node, arch: process.arch };
}
