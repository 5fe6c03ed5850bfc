import { readFileSync, realpathSync } from 'node:fs';
import { dirname, resolve, sep } from 'node:path';

/**
 * How the file system holding the database came to be read-only:
 * - `disk error`: the kernel stopped writes to it after an I/O error (ext4's errors=remount-ro,
 *   a journal abort). An SD card wearing out does this. Older kernels mark the superblock read-only
 *   and leave the mount saying rw; 6.15 and later add `emergency_ro` and leave both saying rw, so
 *   access(2) still calls the file writable while every write fails with EROFS.
 * - `mounted`: mounted read-only (fstab, `mount -o remount,ro`).
 * - `view`: read-only for this process only: a read-only bind mount, as systemd's ProtectSystem=
 *   makes for a service, or a container's.
 */
export type ReadOnlyCause = 'disk error' | 'mounted' | 'view';

export interface ReadOnlyStorage {
  mountPoint: string;
  cause: ReadOnlyCause;
  /** What it is, in a line: health, the store's errors. */
  summary: string;
  /** What to do: doctor's hint, the log. */
  advice: string;
}

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

function describe(mountPoint: string, cause: ReadOnlyCause, dbPath: string): ReadOnlyStorage {
  if (cause === 'disk error') {
    return {
      mountPoint,
      cause,
      summary: `the file system at ${mountPoint} went read-only: the kernel stopped writes to it after a disk error (dmesg says which)`,
      advice:
        `the storage under ${mountPoint} reported an error and the kernel made it read-only; an SD card that does this is failing. ` +
        `Waiting records are still read and published, but nothing new can be stored: webhooks are answered 503, so the vendor retries them. ` +
        `Copy ${dbPath} (and its -wal file) off the box, replace the card, and restore the copy to storage.path (docs/OPERATIONS.md, "Troubleshooting")`,
    };
  }
  if (cause === 'mounted') {
    return {
      mountPoint,
      cause,
      summary: `the file system at ${mountPoint} is mounted read-only`,
      advice: `put storage.path on a writable file system (the default /var/lib/chair-agent/agent.db), or mount ${mountPoint} read-write`,
    };
  }
  return {
    mountPoint,
    cause,
    summary: `${mountPoint} is read-only for the agent (a read-only bind mount: a sandbox such as the unit's ProtectSystem=strict, or a container)`,
    advice: `keep storage.path under /var/lib/chair-agent, or let the service write there: sudo systemctl edit chair-agent, then [Service] ReadWritePaths=${mountPoint}`,
  };
}

/**
 * Whether the file system that holds (or would hold) the database at `path` is read-only, as this
 * process's mount table says: the only reliable word on it, since a file system the kernel made
 * read-only after an error still passes access(2) on current kernels. Null when it is writable,
 * or when the mount table cannot be read (not Linux).
 */
export function readOnlyStorage(path: string, mountinfo: () => string = () => readFileSync('/proc/self/mountinfo', 'utf8')): ReadOnlyStorage | null {
  if (path === ':memory:' || path === '') return null;
  const dir = existingDirectory(path);
  if (dir === null) return null;
  let mounts: Mount[];
  try {
    mounts = parseMountinfo(mountinfo());
  } catch {
    return null;
  }
  // The deepest mount point above the directory; of several at one point, the last mounted.
  let mount: Mount | undefined;
  for (const m of mounts) if (under(dir, m.mountPoint) && (!mount || m.mountPoint.length >= mount.mountPoint.length)) mount = m;
  if (!mount) return null;
  const mountRo = mount.mountOptions.includes('ro');
  const superRo = mount.superOptions.includes('ro');
  if (mount.superOptions.includes('emergency_ro') || (superRo && !mountRo)) return describe(mount.mountPoint, 'disk error', path);
  if (mountRo && superRo) return describe(mount.mountPoint, 'mounted', path);
  if (mountRo) return describe(mount.mountPoint, 'view', path);
  return null;
}
