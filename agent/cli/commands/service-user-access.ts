import { spawnSync } from 'node:child_process';
import { existsSync, realpathSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import type { ServiceIdentity } from './service-identity.js';

/** Whether the service could open a path: asked of the kernel as its account, or 'unknown'. */
export type Probe = (who: ServiceIdentity, test: Test, path: string) => boolean | 'unknown';

type Test = '-r' | '-w' | '-x';

/**
 * Asks the kernel, which also applies ACLs: `test` run by setpriv (util-linux, on every Debian)
 * with the service's user, group and supplementary groups. Only root can take another identity;
 * anyone else gets 'unknown' and the mode bits decide.
 */
export const kernelProbe: Probe = (who, test, path) => {
  const groups = who.groups.length > 0 ? ['--groups', who.groups.join(',')] : ['--clear-groups'];
  const r = spawnSync('setpriv', ['--reuid', String(who.uid), '--regid', String(who.gid), ...groups, '--', 'test', test, path], { encoding: 'utf8', timeout: 5_000 });
  if (r.status === 0) return true;
  // `test` says no with status 1 and nothing on stderr; setpriv's own failures say why.
  if (r.status === 1 && !r.stderr) return false;
  return 'unknown';
};

/** The mode bits' answer, by owner, then the primary and supplementary groups, then others. */
const modeProbe: Probe = (who, test, path) => {
  const bit = test === '-r' ? 4 : test === '-w' ? 2 : 1;
  let st;
  try {
    st = statSync(path);
  } catch {
    // Not root, and a directory above is closed to us too: nothing to claim about the service.
    return 'unknown';
  }
  if (st.uid === who.uid) return (st.mode & (bit << 6)) !== 0;
  if (st.gid === who.gid || who.groups.includes(st.gid)) return (st.mode & (bit << 3)) !== 0;
  return (st.mode & bit) !== 0;
};

/**
 * Why the service could not read `path`, or null when it can (or when the file is not there, which
 * whoever reads it reports). `doctor` runs as root, who reads everything: this is what tells an
 * installer a file is out of the service's reach before the service fails on it.
 */
export function unreadableBy(path: string, who: ServiceIdentity, probe: Probe = kernelProbe): string | null {
  const at = locate(path, who);
  if (typeof at !== 'object' || at === null) return at;
  const { paths } = at;
  // The kernel's yes settles it; the mode bits of the file alone do not (a directory above may be closed).
  const file = probe(who, '-r', path);
  if (file === true) return null;
  const closed = closedAbove(paths, who, probe);
  if (closed) return closed;
  return (file === 'unknown' ? modeProbe(who, '-r', path) : file) === false ? `${path} is not readable by ${who.name}` : null;
}

/**
 * Why the service could not create and write a file in `dir` (the database, its WAL and its
 * shared-memory file beside it) and write `file` there when it exists, or null when it can.
 * Beside the permissions, the unit's sandbox: under ProtectSystem=strict everything is read-only
 * for the service but its state directory and ReadWritePaths=, though root writes there. Its
 * state directory systemd makes and hands to the service at each start, whatever it holds now.
 */
export function unwritableBy(dir: string, who: ServiceIdentity, probe: Probe = kernelProbe, file?: string): string | null {
  const at = locate(dir, who);
  if (typeof at !== 'object' || at === null) return at;
  const { real } = at;
  const under = (p: string, d: string): boolean => p === d || p.startsWith(`${d}/`);
  if (who.writable && !who.writable.some((w) => under(real, w))) {
    return `${dir} is read-only for the service (${who.readOnlyBy}: it writes only under ${who.writable.filter((w) => !w.startsWith('/sys/')).join(', ')})`;
  }
  if (who.stateDirectories.some((d) => under(real, d))) return null;
  const answer = probe(who, '-w', real);
  if (answer === true) {
    // A database file root made (a command run with sudo before the first start) is not the service's either.
    const f = file && existsSync(file) ? probe(who, '-w', file) : true;
    return (f === 'unknown' ? modeProbe(who, '-w', file as string) : f) === false ? `${file} is not writable by ${who.name}` : null;
  }
  const closed = closedAbove([real, dir].map((p) => `${p}/x`), who, probe);
  if (closed) return closed;
  return (answer === 'unknown' ? modeProbe(who, '-w', real) : answer) === false ? `${dir} is not writable by ${who.name}` : null;
}

/**
 * Why the service could not open a device node for reading and writing (a GPIO chip), or null.
 * Its mode and owner go in the answer: that is what tells a udev rule's work from its absence.
 */
export function deviceClosedTo(path: string, who: ServiceIdentity, probe: Probe = kernelProbe): string | null {
  for (const test of ['-r', '-w'] as const) {
    const answer = probe(who, test, path);
    if ((answer === 'unknown' ? modeProbe(who, test, path) : answer) !== false) continue;
    const st = statSync(path);
    return `${path} (mode ${(st.mode & 0o777).toString(8).padStart(4, '0')}, owner ${st.uid}:${st.gid}) cannot be opened by ${who.name}`;
  }
  return null;
}

/**
 * A path as written and where its links lead; null when it is not there (whoever opens it says
 * so), or why the unit's sandbox hides it from the service.
 */
function locate(path: string, who: ServiceIdentity): { real: string; paths: string[] } | string | null {
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    return null;
  }
  const paths = [...new Set([path, real])];
  for (const p of paths) {
    const hid = who.hidden.find((h) => p === h.dir || p.startsWith(`${h.dir}/`));
    if (hid) return `${p} is under ${hid.dir}, which the service's unit hides from it (${hid.by})`;
  }
  return { real, paths };
}

/** The first directory, from the top, that the service cannot pass through on the way to each path. */
function closedAbove(paths: readonly string[], who: ServiceIdentity, probe: Probe): string | null {
  const ask = (p: string): boolean | 'unknown' => {
    const answer = probe(who, '-x', p);
    return answer === 'unknown' ? modeProbe(who, '-x', p) : answer;
  };
  for (const p of paths) {
    const above: string[] = [];
    for (let dir = dirname(p); ; dir = dirname(dir)) {
      above.unshift(dir);
      if (dir === dirname(dir)) break;
    }
    const closed = above.find((dir) => ask(dir) === false);
    if (closed) return `${closed} is not searchable by ${who.name}`;
  }
  return null;
}

/** Whether every account on the box can read the file. */
export function worldReadable(path: string): boolean {
  try {
    return (statSync(path).mode & 0o004) !== 0;
  } catch {
    return false;
  }
}
