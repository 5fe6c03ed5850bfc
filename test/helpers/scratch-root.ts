import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Vitest global setup: every scratch directory a test run makes goes under one root that is
 * removed when the run ends. Tests make hundreds of mkdtemp directories (databases, broker
 * configs, staging roots, sockets) and many do not remove their own; before this, every
 * `npm test` left them in /tmp until a user's disk filled. The forked test workers, and the
 * agents and brokers they spawn, inherit TMPDIR, so os.tmpdir() names the root everywhere.
 * Set CHAIR_AGENT_KEEP_TEST_TMP=1 to keep it for a post-mortem; its path is printed then.
 */
export default function setup(): () => void {
  const root = mkdtempSync(join(tmpdir(), 'chair-agent-test-'));
  // As /tmp is: Mosquitto drops to its own user and the credential tests run commands as
  // another user, and both must reach the directories the tests make for them here.
  chmodSync(root, 0o1777);
  const previous = process.env.TMPDIR;
  process.env.TMPDIR = root;
  return () => {
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
    if (process.env.CHAIR_AGENT_KEEP_TEST_TMP === '1') {
      process.stdout.write(`test scratch kept in ${root}\n`);
      return;
    }
    rmSync(root, { recursive: true, force: true, maxRetries: 3 });
  };
}
