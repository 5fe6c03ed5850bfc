import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';

const canRun = process.getuid?.() === 0 && spawnSync('useradd', ['--help']).status === 0;
const INSTALL = join(ROOT, 'scripts', 'install.sh');

function install(stage: string, args: string[] = [], env: Record<string, string> = {}): { code: number | null; out: string } {
  const r = spawnSync('bash', [INSTALL, '--root', stage, ...args], { encoding: 'utf8', env: { PATH: process.env['PATH'], HOME: process.env['HOME'], ...env } });
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

describe.skipIf(!canRun)('scripts/install.sh into a staging root', () => {
  it('installs the unit, the code, a config and credentials with the right owners and modes; twice gives the same result', () => {
    const stage = mkdtempSync(join(tmpdir(), 'stage-'));
    const env = { CHAIR_AGENT_VENDOR_API_KEY: 'vendor-key-from-env' };
    const first = install(stage, [], env);
    expect(first.code, first.out).toBe(0);
    const svc = ids(stage, 'chair-agent');
    expect(svc).not.toBeNull();
    expect(readFileSync(join(stage, 'etc/group'), 'utf8')).toMatch(/^gpio:x:\d+:chair-agent$/m);

    const unit = join(stage, 'etc/systemd/system/chair-agent.service');
    expect(owner(unit)).toBe('644 0:0');
    expect(readFileSync(unit, 'utf8')).toContain(`ExecStart=${process.execPath} /opt/chair-agent/dist/agent/main.js run`);
    expect(readlinkSync(join(stage, 'etc/systemd/system/multi-user.target.wants/chair-agent.service'))).toBe('/etc/systemd/system/chair-agent.service');
    expect(owner(join(stage, 'etc/chair-agent'))).toBe(`750 0:${svc?.gid}`);
    expect(owner(join(stage, 'etc/chair-agent/config.yaml'))).toBe(`640 0:${svc?.gid}`);
    expect(owner(join(stage, 'etc/chair-agent/credentials'))).toBe('700 0:0');
    for (const name of ['vendor-api-key', 'webhook-secret', 'mqtt-password']) {
      expect(owner(join(stage, 'etc/chair-agent/credentials', name))).toBe('600 0:0');
    }
    expect(readFileSync(join(stage, 'etc/chair-agent/credentials/vendor-api-key'), 'utf8')).toBe('vendor-key-from-env');
    expect(owner(join(stage, 'var/lib/chair-agent'))).toBe(`750 ${svc?.uid}:${svc?.gid}`);
    expect(owner(join(stage, 'usr/local/bin/chair-agent'))).toBe('755 0:0');

    // Production dependencies only, and the installed program runs.
    const modules = readdirSync(join(stage, 'opt/chair-agent/node_modules'));
    expect(modules).toContain('better-sqlite3');
    expect(modules).not.toContain('vitest');
    expect(modules).not.toContain('typescript');
    const version = spawnSync(process.execPath, [join(stage, 'opt/chair-agent/dist/agent/main.js'), '--version'], { encoding: 'utf8' });
    expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);

    const before = manifest(stage);
    const second = install(stage, [], env);
    expect(second.code, second.out).toBe(0);
    expect(second.out).toContain('kept the existing /etc/chair-agent/config.yaml');
    expect(manifest(stage)).toEqual(before);
  });

  it('keeps an edited config and existing credentials on an upgrade', () => {
    const stage = mkdtempSync(join(tmpdir(), 'stage-'));
    expect(install(stage, [], { CHAIR_AGENT_WEBHOOK_SECRET: 'first-secret' }).code).toBe(0);
    writeFileSync(join(stage, 'etc/chair-agent/config.yaml'), 'site: {id: edited}\n');
    expect(install(stage).code).toBe(0);
    expect(readFileSync(join(stage, 'etc/chair-agent/config.yaml'), 'utf8')).toBe('site: {id: edited}\n');
    expect(readFileSync(join(stage, 'etc/chair-agent/credentials/webhook-secret'), 'utf8')).toBe('first-secret');
  });

  it('uninstall removes the service and the code and keeps config and data; purge removes everything', () => {
    const stage = mkdtempSync(join(tmpdir(), 'stage-'));
    expect(install(stage).code).toBe(0);
    writeFileSync(join(stage, 'var/lib/chair-agent/agent.db'), 'data');
    const un = install(stage, ['--uninstall']);
    expect(un.code, un.out).toBe(0);
    expect(existsSync(join(stage, 'opt/chair-agent'))).toBe(false);
    expect(existsSync(join(stage, 'etc/systemd/system/chair-agent.service'))).toBe(false);
    expect(existsSync(join(stage, 'etc/systemd/system/multi-user.target.wants/chair-agent.service'))).toBe(false);
    expect(readFileSync(join(stage, 'var/lib/chair-agent/agent.db'), 'utf8')).toBe('data');
    expect(existsSync(join(stage, 'etc/chair-agent/config.yaml'))).toBe(true);
    const purge = install(stage, ['--purge']);
    expect(purge.code, purge.out).toBe(0);
    expect(existsSync(join(stage, 'var/lib/chair-agent'))).toBe(false);
    expect(existsSync(join(stage, 'etc/chair-agent'))).toBe(false);
    expect(ids(stage, 'chair-agent')).toBeNull();
  });
});
