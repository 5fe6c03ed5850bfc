import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * The environment systemd gives the service, for `doctor`: run from a login shell (or sudo, whose
 * PAM reads /etc/environment), doctor has variables the service never sees, systemd gives a
 * service only its manager's environment (DefaultEnvironment=, `systemctl set-environment`),
 * the unit's Environment= and its EnvironmentFile=s, in that order of precedence. A proxy set in
 * /etc/environment for apt and curl would otherwise pass doctor while the service reaches the
 * vendor without it. Null where systemd does not run or the unit is not installed.
 */
export function serviceEnvironment(systemctl = 'systemctl', readFile: (path: string) => string = (p) => readFileSync(p, 'utf8')): Record<string, string> | null {
  const manager = spawnSync(systemctl, ['show-environment'], { encoding: 'utf8', timeout: 5_000 });
  const unit = spawnSync(systemctl, ['show', 'chair-agent.service', '-p', 'LoadState', '-p', 'Environment', '-p', 'EnvironmentFiles'], { encoding: 'utf8', timeout: 5_000 });
  if (manager.status !== 0 || unit.status !== 0 || typeof manager.stdout !== 'string' || typeof unit.stdout !== 'string') return null;
  const shown = unit.stdout.split('\n');
  if (!shown.includes('LoadState=loaded')) return null;
  const env: Record<string, string> = {};
  for (const line of manager.stdout.split('\n')) assign(env, unquoteShell(line));
  for (const line of shown.filter((l) => l.startsWith('Environment='))) for (const word of shownWords(line.slice('Environment='.length))) assign(env, word);
  for (const line of shown.filter((l) => l.startsWith('EnvironmentFiles='))) {
    // "EnvironmentFiles=/etc/default/chair-agent (ignore_errors=yes)", one line per file.
    const path = line.slice('EnvironmentFiles='.length).replace(/ \(ignore_errors=(yes|no)\)$/, '');
    let text: string;
    try {
      text = readFile(path);
    } catch {
      continue; // systemd would not start the service without it unless "-": either way, nothing from it.
    }
    for (const [name, value] of environmentFile(text)) env[name] = value;
  }
  return env;
}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

function assign(env: Record<string, string>, word: string): void {
  const eq = word.indexOf('=');
  if (eq > 0 && NAME.test(word.slice(0, eq))) env[word.slice(0, eq)] = word.slice(eq + 1);
}

/**
 * `systemctl show -p Environment`: the assignments on one line, separated by spaces, each quoted
 * as a shell word where it needs it ("A=b c", or $'...' with C escapes).
 */
export function shownWords(value: string): string[] {
  const words: string[] = [];
  let i = 0;
  while (i < value.length) {
    while (value[i] === ' ') i++;
    if (i >= value.length) break;
    let word = '';
    while (i < value.length && value[i] !== ' ') {
      const c = value[i] as string;
      if (c === '"') {
        i++;
        while (i < value.length && value[i] !== '"') {
          if (value[i] === '\\' && i + 1 < value.length) i++;
          word += value[i];
          i++;
        }
        i++;
      } else if (c === '$' && value[i + 1] === "'") {
        const end = closingQuote(value, i + 2);
        word += cUnescape(value.slice(i + 2, end));
        i = end + 1;
      } else if (c === "'") {
        const end = value.indexOf("'", i + 1);
        word += value.slice(i + 1, end < 0 ? value.length : end);
        i = end < 0 ? value.length : end + 1;
      } else {
        word += c;
        i++;
      }
    }
    words.push(word);
  }
  return words;
}

/** `systemctl show-environment`: NAME=value per line, the value quoted as a shell word where needed. */
function unquoteShell(line: string): string {
  const eq = line.indexOf('=');
  if (eq < 0) return line;
  return `${line.slice(0, eq)}=${shownWords(line.slice(eq + 1)).join(' ')}`;
}

function closingQuote(s: string, from: number): number {
  for (let i = from; i < s.length; i++) {
    if (s[i] === '\\') i++;
    else if (s[i] === "'") return i;
  }
  return s.length;
}

function cUnescape(s: string): string {
  return s.replace(/\\(x[0-9a-fA-F]{2}|[0-7]{1,3}|.)/g, (_, e: string) => {
    if (e[0] === 'x') return String.fromCharCode(parseInt(e.slice(1), 16));
    if (/^[0-7]/.test(e)) return String.fromCharCode(parseInt(e, 8));
    return ({ n: '\n', t: '\t', r: '\r', a: '\x07', b: '\b', f: '\f', v: '\v', e: '\x1b' } as Record<string, string>)[e] ?? e;
  });
}

/**
 * An EnvironmentFile= as systemd reads it: NAME=value lines, # and ; comments, a value in single
 * or double quotes. A line systemd refuses (`export NAME=value`: not a valid name) sets nothing.
 */
export function environmentFile(text: string): [string, string][] {
  const out: [string, string][] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    const name = line.slice(0, eq).trim();
    if (!NAME.test(name)) continue;
    let value = line.slice(eq + 1).trim();
    const q = value[0];
    if ((q === '"' || q === "'") && value.length >= 2 && value.endsWith(q)) value = value.slice(1, -1);
    out.push([name, value]);
  }
  return out;
}
