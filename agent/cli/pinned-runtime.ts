import { accessSync, constants, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ARCH: Partial<Record<string, string>> = { x64: 'x64', arm64: 'arm64' };

/**
 * The checkout's pinned Node.js runtime, as scripts/node finds it: the link scripts/use-node.sh
 * sets, else the node-linux-<arch> package `npm ci` installed. Null outside a checkout (the
 * packages' launcher runs their own runtime) or when it is missing.
 */
export function pinnedRuntime(root: URL): string | null {
  const arch = ARCH[process.arch];
  const candidates = ['node_modules/.chair-agent-node', ...(arch ? [`node_modules/node-linux-${arch}/bin/node`] : [])];
  for (const c of candidates) {
    try {
      const path = realpathSync(fileURLToPath(new URL(c, root)));
      accessSync(path, constants.X_OK);
      if (path !== realpathSync(process.execPath)) return path;
    } catch {
      // not there: the next one
    }
  }
  return null;
}

/** What to type instead, when no runtime can be had. */
export const OLD_NODE_HINT =
  'In a checkout, `npm ci` brings the pinned runtime: then `npx chair-agent ...` or `npm run chair-agent -- ...`.\n' +
  'On a site box, install the package (its launcher, /usr/bin/chair-agent, runs its own runtime).\n' +
  'Elsewhere, install Node.js 22, 24 or 26.\n';
