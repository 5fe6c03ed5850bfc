import { readFileSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

/** The account the packaged unit runs the agent as (systemd/chair-agent.service, User=). */
export const SERVICE_USER = 'chair-agent';

export interface Account {
  name: string;
  uid: number;
  gid: number;
}

/** The service's account from the passwd file, or null where it does not exist (a developer's machine). */
export function serviceAccount(passwdPath = '/etc/passwd', name = SERVICE_USER): Account | null {
  let text: string;
  try {
    text = readFileSync(passwdPath, 'utf8');
  } catch {
    return null;
  }
  for (const line of text.split('\n')) {
    const [user, , uid, gid] = line.split(':');
    if (user === name && uid !== undefined && gid !== undefined) return { name, uid: Number(uid), gid: Number(gid) };
  }
  return null;
}

/**
 * Whether `account` can read `path` by the mode bits: the file readable and every directory above
 * it searchable, by owner, primary group or others. `doctor` runs as root, who reads everything,
 * while the service does not: this is what tells an installer the key is out of its reach before
 * the service stops on it. Supplementary groups and ACLs are not looked at.
 */
export function unreadableBy(path: string, account: Account): string | null {
  const allows = (p: string, bit: 4 | 1): boolean => {
    const st = statSync(p);
    const mode = st.mode;
    if (st.uid === account.uid) return (mode & (bit << 6)) !== 0;
    if (st.gid === account.gid) return (mode & (bit << 3)) !== 0;
    return (mode & bit) !== 0;
  };
  try {
    for (let dir = dirname(path); ; dir = dirname(dir)) {
      if (!allows(dir, 1)) return `${dir} is not searchable by ${account.name}`;
      if (dir === dirname(dir)) break;
    }
    return allows(path, 4) ? null : `${path} is not readable by ${account.name}`;
  } catch {
    // A file that is not there is reported by whoever reads it (ENOENT), not as out of reach.
    return null;
  }
}

/** Whether every account on the box can read the file. */
export function worldReadable(path: string): boolean {
  try {
    return (statSync(path).mode & 0o004) !== 0;
  } catch {
    return false;
  }
}
