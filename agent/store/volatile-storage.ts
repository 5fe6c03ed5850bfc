import { realpathSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, resolve, sep } from 'node:path';

/** statfs(2) f_type of the file systems whose contents are gone at the next power cut. */
const VOLATILE: Record<number, string> = {
  0x01021994: 'tmpfs',
  0x858458f6: 'ramfs',
  // Raspberry Pi OS's overlay file system (raspi-config, Performance: Overlay File System) keeps
  // every change in RAM; a container's root is an overlay that goes with the container.
  0x794c7630: 'overlay',
};

export interface VolatileStorage {
  fileSystem: string;
  /** What to change, for /healthz, doctor and the log. */
  advice: string;
}

/**
 * Whether the database at `path` lives on a file system that a power cut empties. A database in
 * the system's temporary directory, or in memory, is taken as meant to be thrown away (tests, a
 * demo) and not reported. Null when it is durable, or when the file system cannot be asked.
 */
export function volatileStorage(path: string): VolatileStorage | null {
  if (path === ':memory:' || path === '') return null;
  let dir: string;
  try {
    dir = realpathSync(dirname(resolve(path)));
  } catch {
    return null;
  }
  try {
    const tmp = realpathSync(tmpdir());
    if (dir === tmp || dir.startsWith(`${tmp}${sep}`)) return null;
  } catch {
    // no temporary directory to compare with
  }
  let type: number;
  try {
    type = Number(statfsSync(dir).type);
  } catch {
    return null;
  }
  const fileSystem = VOLATILE[type];
  if (!fileSystem) return null;
  return {
    fileSystem,
    advice:
      fileSystem === 'overlay'
        ? `${dir} is on an overlay (Raspberry Pi OS's overlay file system keeps it in RAM): waiting transactions are lost at the next power cut. Put storage.path on a persistent file system: with the overlay on, mount a partition or USB disk at /var/lib/chair-agent (README, "Read-only root")`
        : `${dir} is on ${fileSystem}, in RAM: waiting transactions are lost at the next power cut. Put storage.path on a persistent file system (the default /var/lib/chair-agent/agent.db)`,
  };
}
