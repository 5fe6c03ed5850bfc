import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { addonPath } from '../../agent/gpio/gpiod-binding.js';
import { mosquittoPath } from '../../bench/lib/broker.js';
import { loopCardWorks } from './loop-card.js';

/**
 * The tools a test may need beyond the project's own node_modules. A test that needs one the
 * machine lacks is skipped, and its title carries `[needs <tool>]`, which the missing-tools
 * reporter counts into one line at the end of the run ("N tests skipped: install mosquitto to
 * run them"). Nothing fails for a missing tool.
 */
export type Tool = 'mosquitto' | 'mosquitto 2.0.12 or later' | 'mosquitto with websockets' | 'tinyproxy' | 'microsocks' | 'squid' | 'squid with ssl-bump' | 'nginx' | 'mosquitto clients' | 'curl' | 'prometheus' | 'gpiod addon' | 'systemd' | 'python3' | 'jinja2' | 'chromium' | 'rabbitmq' | 'root' | 'a Node.js older than 22' | 'prlimit' | 'openssl' | 'a loop-mounted ext4 (root)' | 'update-ca-certificates';

const onPath = (cmd: string): boolean => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;

const detect: Record<Tool, () => boolean> = {
  mosquitto: () => mosquittoPath() !== null,
  // From 2.0.12 Mosquitto applies max_keepalive to MQTT 3.1.1 clients (Debian 12 has 2.0.11).
  'mosquitto 2.0.12 or later': () => mosquittoAtLeast(2, 0, 12),
  // 2.1 serves WebSocket itself; 2.0 through libwebsockets, which Debian 12's 2.0.11 is built without.
  'mosquitto with websockets': () => {
    if (mosquittoAtLeast(2, 1, 0)) return true;
    const bin = mosquittoPath();
    return bin !== null && /libwebsockets/.test(spawnSync('ldd', [bin], { encoding: 'utf8' }).stdout ?? '');
  },
  'mosquitto clients': () => onPath('mosquitto_sub') && onPath('mosquitto_pub'),
  curl: () => onPath('curl'),
  tinyproxy: () => onPath('tinyproxy'),
  microsocks: () => onPath('microsocks'),
  // Debian puts it in /usr/sbin, which a user's PATH may not hold.
  squid: () => onPath('squid') || existsSync('/usr/sbin/squid'),
  nginx: () => existsSync('/usr/sbin/nginx'),
  // Debian's squid-openssl (which replaces squid): TLS inspection needs its certificate generator.
  'squid with ssl-bump': () => existsSync('/usr/lib/squid/security_file_certgen') && /--with-openssl/.test(spawnSync('/usr/sbin/squid', ['-v'], { encoding: 'utf8' }).stdout ?? ''),
  prometheus: () => onPath('prometheus') && onPath('promtool'),
  'gpiod addon': () => existsSync(addonPath() ?? ''),
  systemd: () => onPath('systemd-analyze') && onPath('systemctl') && onPath('systemd-notify') && analyzeWorks(),
  python3: () => spawnSync('python3', ['-c', 'import socket; socket.recv_fds']).status === 0,
  jinja2: () => pythonWithJinja2() !== null,
  chromium: () => existsSync('/usr/bin/chromium'),
  rabbitmq: () => existsSync('/usr/lib/rabbitmq/bin/rabbitmq-server') && onPath('openssl'),
  root: () => process.getuid?.() === 0,
  prlimit: () => onPath('prlimit'),
  openssl: () => onPath('openssl'),
  // Debian's ca-certificates, which makes the box's CA store (/etc/ssl/certs).
  'update-ca-certificates': () => existsSync('/usr/sbin/update-ca-certificates') && onPath('openssl'),
  'a Node.js older than 22': () => oldNode() !== null,
  'a loop-mounted ext4 (root)': loopCardWorks,
};

/**
 * Whether systemd-analyze can verify a unit here: installed but without /run/systemd (a package
 * pulled it into a chroot where the tests run as a user) it fails "Failed to create directory".
 */
function analyzeWorks(): boolean {
  const dir = mkdtempSync(join(tmpdir(), 'analyze-'));
  try {
    writeFileSync(join(dir, 'probe.service'), '[Unit]\nDescription=probe\n[Service]\nExecStart=/bin/true\n');
    return spawnSync('systemd-analyze', ['verify', join(dir, 'probe.service')], { stdio: 'ignore' }).status === 0;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Whether the Mosquitto the tests run is this version or later. */
function mosquittoAtLeast(major: number, minor: number, patch: number): boolean {
  const bin = mosquittoPath();
  const r = bin ? spawnSync(bin, ['-h'], { encoding: 'utf8' }) : null;
  const v = /mosquitto version (\d+)\.(\d+)\.(\d+)/.exec(`${r?.stdout ?? ''}${r?.stderr ?? ''}`)?.slice(1).map(Number);
  if (!v) return false;
  const [a = 0, b = 0, c = 0] = v;
  return a !== major ? a > major : b !== minor ? b > minor : c >= patch;
}

/**
 * A Python 3.11 or later that has Jinja2, the engine Home Assistant renders templates with, or
 * null. Debian's python3-jinja2 goes to /usr/bin/python3, which a user's PATH may put behind
 * another Python (pyenv's, a virtualenv's).
 */
export function pythonWithJinja2(): string | null {
  for (const python of ['python3', '/usr/bin/python3']) {
    const r = spawnSync(python, ['-c', 'import sys, jinja2; sys.exit(sys.version_info < (3, 11))'], { stdio: 'ignore' });
    if (r.status === 0) return python;
  }
  return null;
}

/** A system Node.js older than the agent needs (a distro's 18 or 20), or null. */
export function oldNode(): string | null {
  for (const path of ['/usr/bin/node', '/usr/local/bin/node', '/usr/bin/nodejs']) {
    const r = spawnSync(path, ['-p', 'process.versions.node.split(".")[0]'], { encoding: 'utf8' });
    if (r.status === 0 && Number(r.stdout.trim()) < 22) return path;
  }
  return null;
}

const known = new Map<Tool, boolean>();

/** Whether this machine has the tool (asked once per test file). */
export function has(tool: Tool): boolean {
  let yes = known.get(tool);
  if (yes === undefined) {
    yes = detect[tool]();
    known.set(tool, yes);
  }
  return yes;
}
