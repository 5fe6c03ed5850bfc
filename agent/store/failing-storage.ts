import { closeSync, openSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, resolve, sep } from 'node:path';
import { errorCode } from '../platform/errors.js';

/**
 * What is wrong with the file system under the database, as the kernel has it:
 * - `failed`: every access fails with EIO. An ext4 the kernel shut down after a disk error does
 *   this: with errors=remount-ro, Linux 6.5 to 6.14 (Raspberry Pi OS's 6.6 and 6.12) stop the file
 *   system so rather than make it read-only, and its mount still says rw. So does a USB disk pulled
 *   out. Nothing can be read either: SQLite then says "disk I/O error" or even "database disk
 *   image is malformed" of a file that is whole.
 * - `stopped`: the kernel stopped writes after a disk error and reads still work. Linux 6.15 and
 *   later say `emergency_ro` and keep calling the mount rw (access(2) passes); kernels before 6.5
 *   mark the superblock ro.
 * - `mounted`: mounted read-only (fstab, `mount -o remount,ro`).
 * - `view`: read-only for this process only: a read-only bind mount, as systemd's ProtectSystem=
 *   makes for a service, or a container's.
 */
export type StorageFault = 'failed' | 'stopped' | 'mounted' | 'view';

export interface FailingStorage {
  mountPoint: string;
  fault: StorageFault;
  /** What it is, in a line: health, the store's errors. */
  summary: string;
  /** What to do: doctor's hint, the log. */
  advice: string;
}

export interface StorageProbes {
  /** The text of /proc/self/mountinfo. */
  mountinfo: () => string;
  /** Opens the file for reading and closes it: throws what open(2) says. */
  open: (path: string) => void;
}

const kernelProbes: StorageProbes = {
  mountinfo: () => readFileSync('/proc/self/mountinfo', 'utf8'),
  open: (path) => closeSync(openSync(path, 'r')),
};

interface Mount {
  mountPoint: string;
  mountOptions: string[];
  superOptions: string[];
}

/** /proc/self/mountinfo escapes space, tab, newline and backslash in a path as octal. */
const unescape = (field: string): string => field.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

/** The lines of mountinfo(5): "id parent major:minor root mount-point options [optional...] - type source super-options". */
export function parseMountinfo(text: string): Mount[] {
  const mounts: Mount[] = [];
  for (const line of text.split('\n')) {
    const fields = line.split(' ');
    const dash = fields.indexOf('-', 6);
    if (fields.length < 10 || dash < 0) continue;
    mounts.push({
      mountPoint: unescape(fields[4] as string),
      mountOptions: (fields[5] as string).split(','),
      superOptions: (fields[dash + 3] ?? '').split(','),
    });
  }
  return mounts;
}

const under = (path: string, mountPoint: string): boolean =>
  mountPoint === '/' || path === mountPoint || path.startsWith(`${mountPoint}${sep}`);

/** The directory itself, or the nearest one above it that exists (a database not created yet). */
function existingDirectory(path: string): string | null {
  for (let dir = dirname(resolve(path)); ; dir = dirname(dir)) {
    try {
      return realpathSync(dir);
    } catch {
      if (dir === dirname(dir)) return null;
    }
  }
}

const REPLACE = (dbPath: string): string =>
  `Copy ${dbPath} and its -wal file off the box if they can still be read, replace the card (or disk), and restore the copy to storage.path (docs/OPERATIONS.md, "Troubleshooting")`;

function describe(mountPoint: string, fault: StorageFault, dbPath: string): FailingStorage {
  switch (fault) {
    case 'failed':
      return {
        mountPoint,
        fault,
        summary: `the file system at ${mountPoint} fails every access (EIO): the kernel shut it down after a disk error, or its disk is gone (dmesg says which)`,
        advice:
          `the storage under ${mountPoint} failed; an SD card that does this is worn out. Nothing can be stored or read from it: webhooks are answered 503, so the vendor retries them, ` +
          `and buttons, LEDs and chair states go on. A reboot checks the file system and may bring it back for a while. ${REPLACE(dbPath)}`,
      };
    case 'stopped':
      return {
        mountPoint,
        fault,
        summary: `the file system at ${mountPoint} went read-only: the kernel stopped writes to it after a disk error (dmesg says which)`,
        advice:
          `the storage under ${mountPoint} reported an error and the kernel made it read-only; an SD card that does this is failing. ` +
          `Waiting records are still read and published, but nothing new can be stored: webhooks are answered 503, so the vendor retries them. ${REPLACE(dbPath)}`,
      };
    case 'mounted':
      return {
        mountPoint,
        fault,
        summary: `the file system at ${mountPoint} is mounted read-only`,
        advice: `put storage.path on a writable file system (the default /var/lib/chair-agent/agent.db), or mount ${mountPoint} read-write`,
      };
    case 'view':
      return {
        mountPoint,
        fault,
        summary: `${mountPoint} is read-only for the agent (a read-only bind mount: a sandbox such as the unit's ProtectSystem=strict, or a container)`,
        advice: `keep storage.path under /var/lib/chair-agent, or let the service write there: sudo systemctl edit chair-agent, then [Service] ReadWritePaths=${mountPoint}`,
      };
  }
}

function faultOf(mount: Mount): StorageFault | null {
  const mountRo = mount.mountOptions.includes('ro');
  const superRo = mount.superOptions.includes('ro');
  // Linux 6.15 and later name a shut-down ext4 so; before, nothing in the mount table says it.
  if (mount.superOptions.includes('shutdown')) return 'failed';
  if (mount.superOptions.includes('emergency_ro') || (superRo && !mountRo)) return 'stopped';
  if (mountRo && superRo) return 'mounted';
  if (mountRo) return 'view';
  return null;
}

/**
 * Whether the file system that holds (or would hold) the database at `path` is failing or
 * read-only: the mount table, then, for what it cannot show, a read-only open of the file (no
 * disk write). access(2) is no help: it passes a file system the kernel stopped. Null when it
 * works, or when it cannot be told (not Linux).
 */
export function failingStorage(path: string, probes: StorageProbes = kernelProbes): FailingStorage | null {
  if (path === ':memory:' || path === '') return null;
  const dir = existingDirectory(path);
  if (dir === null) return null;
  let mounts: Mount[] = [];
  try {
    mounts = parseMountinfo(probes.mountinfo());
  } catch {
    // no mount table: only the open below can tell
  }
  // The deepest mount point above the directory; of several at one point, the last mounted.
  let mount: Mount | undefined;
  for (const m of mounts) if (under(dir, m.mountPoint) && (!mount || m.mountPoint.length >= mount.mountPoint.length)) mount = m;
  const fault = mount ? faultOf(mount) : null;
  const mountPoint = mount?.mountPoint ?? dir;
  if (fault) return describe(mountPoint, fault, path);
  try {
    probes.open(resolve(path));
  } catch (err) {
    if (errorCode(err) === 'EIO') return describe(mountPoint, 'failed', path);
  }
  return null;
}
