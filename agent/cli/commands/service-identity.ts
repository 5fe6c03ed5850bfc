import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * Who the service runs as, and what its sandbox hides, for `doctor`: it runs as root, who reads
 * every file, while the service runs as its own account with the groups and the sandbox its unit
 * gives it. Reading a file as that account is what tells an installer the service cannot.
 */
export interface ServiceIdentity {
  name: string;
  uid: number;
  gid: number;
  /** Supplementary groups: the account's in /etc/group (systemd calls initgroups) and the unit's SupplementaryGroups=. */
  groups: number[];
  /** Directories the unit's sandbox hides from the service, with the setting that does. */
  hidden: { dir: string; by: string }[];
  /**
   * Where the sandbox lets the service write, under ProtectSystem=strict (the state directory,
   * ReadWritePaths=); null where it leaves the file system writable.
   */
  writable: string[] | null;
  /** Its state directories (StateDirectory=): systemd makes them and gives them to the service at each start. */
  stateDirectories: string[];
  /** The setting that makes the rest read-only, for the message. */
  readOnlyBy: string;
}

/** The unit's settings that decide what the service can read, as `systemctl show` prints them. */
export interface UnitSettings {
  User: string;
  Group: string;
  SupplementaryGroups: string;
  ProtectHome: string;
  PrivateTmp: string;
  ProtectSystem: string;
  StateDirectory: string;
  ReadWritePaths: string;
}

/** What systemd/chair-agent.service sets: used where systemctl cannot say (no systemd, unit not installed). */
export const PACKAGED_UNIT: UnitSettings = {
  User: 'chair-agent',
  Group: 'chair-agent',
  SupplementaryGroups: 'gpio',
  ProtectHome: 'yes',
  PrivateTmp: 'yes',
  ProtectSystem: 'strict',
  StateDirectory: 'chair-agent',
  ReadWritePaths: '-/sys/class/gpio -/sys/devices/platform',
};

const UNIT = 'chair-agent.service';

/**
 * The installed unit's settings, drop-ins included (a site's `SupplementaryGroups=ssl-cert`), or
 * the packaged unit's where systemd does not run or the unit is not installed.
 */
export function unitSettings(systemctl = 'systemctl'): UnitSettings {
  const keys = Object.keys(PACKAGED_UNIT) as (keyof UnitSettings)[];
  const r = spawnSync(systemctl, ['show', UNIT, '-p', 'LoadState', ...keys.flatMap((k) => ['-p', k])], { encoding: 'utf8', timeout: 5_000 });
  if (r.status !== 0 || typeof r.stdout !== 'string') return PACKAGED_UNIT;
  const shown = new Map<string, string>();
  for (const line of r.stdout.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) shown.set(line.slice(0, eq), line.slice(eq + 1));
  }
  if (shown.get('LoadState') !== 'loaded') return PACKAGED_UNIT;
  const settings = { ...PACKAGED_UNIT };
  for (const k of keys) settings[k] = shown.get(k) ?? '';
  return settings;
}

export interface AccountFiles {
  passwd?: string;
  group?: string;
}

/** The identity the unit gives the service, or null where its account does not exist (a developer's machine). */
export function serviceIdentity(unit: UnitSettings = unitSettings(), files: AccountFiles = {}): ServiceIdentity | null {
  const passwd = table(files.passwd ?? '/etc/passwd');
  const groups = table(files.group ?? '/etc/group');
  const account = passwd.find((f) => f[0] === unit.User);
  if (!account) return null;
  const byName = (name: string): number | undefined => {
    const g = groups.find((f) => f[0] === name);
    return g ? Number(g[2]) : /^\d+$/.test(name) ? Number(name) : undefined;
  };
  const gid = (unit.Group ? byName(unit.Group) : undefined) ?? Number(account[3]);
  const member = groups.filter((f) => (f[3] ?? '').split(',').includes(unit.User)).map((f) => Number(f[2]));
  const extra = unit.SupplementaryGroups.split(/\s+/).filter(Boolean).map(byName).filter((g): g is number => g !== undefined);
  const hidden: ServiceIdentity['hidden'] = [];
  // ProtectHome=read-only leaves them readable; yes and tmpfs hide what is there.
  if (unit.ProtectHome === 'yes' || unit.ProtectHome === 'tmpfs') {
    for (const dir of ['/home', '/root', '/run/user']) hidden.push({ dir, by: `ProtectHome=${unit.ProtectHome}` });
  }
  if (unit.PrivateTmp === 'yes' || unit.PrivateTmp === 'disconnected') {
    for (const dir of ['/tmp', '/var/tmp']) hidden.push({ dir, by: `PrivateTmp=${unit.PrivateTmp}` });
  }
  // Under strict, only these are writable ("-" marks a path that may be absent, "+" one taken
  // from the root directory of a RootDirectory=, which this unit has none of).
  const stateDirectories = unit.StateDirectory.split(/\s+/).filter(Boolean).map((d) => `/var/lib/${d}`);
  const writable = unit.ProtectSystem === 'strict' ? [...stateDirectories, ...unit.ReadWritePaths.split(/\s+/).filter(Boolean).map((p) => p.replace(/^[-+]+/, ''))] : null;
  const groupsBeyond = [...new Set([...member, ...extra])].filter((g) => g !== gid);
  return { name: unit.User, uid: Number(account[2]), gid, groups: groupsBeyond, hidden, writable, stateDirectories, readOnlyBy: `ProtectSystem=${unit.ProtectSystem}` };
}

/** A colon-separated account file's rows, or none where it cannot be read. */
function table(path: string): string[][] {
  try {
    return readFileSync(path, 'utf8').split('\n').filter((l) => l && !l.startsWith('#')).map((l) => l.split(':'));
  } catch {
    return [];
  }
}
