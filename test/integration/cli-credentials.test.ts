import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAIN, ROOT, runCli, type CliResult } from '../helpers/cli.js';
import { itWith } from '../helpers/tools.js';

const isRoot = process.getuid?.() === 0;
const NOBODY = 65534;

/** The site box's layout: /etc/chair-agent/config.yaml (root:svc 0640) and credentials/ (root 0700). */
function siteEtc(): { etc: string; config: string; credentials: string } {
  const etc = mkdtempSync(join(tmpdir(), 'etc-'));
  chmodSync(etc, 0o755);
  const config = join(etc, 'config.yaml');
  writeFileSync(
    config,
    `site: {id: creds}
vendor: {baseUrl: "http://127.0.0.1:9"}
storage: {path: ${join(etc, 'agent.db')}}
gpio: {driver: sim}
`,
  );
  const credentials = join(etc, 'credentials');
  mkdirSync(credentials, { mode: 0o700 });
  return { etc, config, credentials };
}

/**
 * The runtime and the built CLI where another user can run them. A checkout under a home only its
 * owner may enter (Debian 13's default 0700) hides both from that user: then a copy in the
 * temporary folder serves, as the package's /opt/chair-agent does on a box.
 */
let runnable: { node: string; main: string } | undefined;
function runnableByAll(uid: number): { node: string; main: string } {
  if (runnable) return runnable;
  const probe = spawnSync(process.execPath, [MAIN, '--version'], { uid, gid: uid, stdio: 'ignore' });
  if (probe.status === 0) return (runnable = { node: process.execPath, main: MAIN });
  const dir = mkdtempSync(join(tmpdir(), 'cli-copy-'));
  chmodSync(dir, 0o755);
  copyFileSync(process.execPath, join(dir, 'node'));
  chmodSync(join(dir, 'node'), 0o755);
  cpSync(join(ROOT, 'dist', 'agent'), join(dir, 'dist', 'agent'), { recursive: true });
  writeFileSync(join(dir, 'package.json'), readFileSync(join(ROOT, 'package.json')));
  return (runnable = { node: join(dir, 'node'), main: join(dir, 'dist', 'agent', 'main.js') });
}

/** Runs the built CLI as another user, with input on stdin. */
function runAs(uid: number, args: string[], input = ''): Promise<CliResult> {
  const { node, main } = uid === process.getuid?.() ? { node: process.execPath, main: MAIN } : runnableByAll(uid);
  return new Promise((resolve, reject) => {
    const child = spawn(node, [main, ...args], { uid, gid: uid, env: { PATH: process.env['PATH'] }, stdio: ['pipe', 'pipe', 'pipe'] });
    child.once('error', reject);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

describe('the installed CLI reads the secrets the service gets', () => {
  it('check finds the stored credentials beside the config without $CREDENTIALS_DIRECTORY, and masks them', async () => {
    const { config, credentials } = siteEtc();
    writeFileSync(join(credentials, 'vendor-api-key'), 'stored-vendor-key-0001\n', { mode: 0o600 });
    writeFileSync(join(credentials, 'webhook-secret'), 'stored-webhook-secret-0002', { mode: 0o600 });
    writeFileSync(join(credentials, 'mqtt-password'), '', { mode: 0o600 }); // empty: not set
    const r = await runCli(['check', '--config', config]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('apiKey: "******** (credential vendor-api-key)"');
    expect(r.stdout).toContain('channelSecret: "******** (credential webhook-secret)"');
    expect(r.stdout).not.toContain('password');
    expect(`${r.stdout}${r.stderr}`).not.toContain('stored-vendor-key-0001');
  });

  itWith('root', 'a user who cannot read the config, or the credentials, gets one line naming sudo', async () => {
    const { etc, config, credentials } = siteEtc();
    writeFileSync(join(credentials, 'vendor-api-key'), 'stored-vendor-key-0003', { mode: 0o600 });
    chmodSync(config, 0o640);
    const noConfig = await runAs(NOBODY, ['check', '--config', config]);
    expect(noConfig.code).toBe(78);
    expect(noConfig.stderr).toBe(`chair-agent: cannot read ${config} (permission denied); run it as root: sudo chair-agent check --config ${config}\n`);

    chmodSync(config, 0o644); // readable, but the credentials are root's alone
    const noSecrets = await runAs(NOBODY, ['doctor', '--config', config]);
    expect(noSecrets.code).toBe(78);
    expect(noSecrets.stderr).toBe(`chair-agent: cannot read the stored secrets in ${credentials} (permission denied); run it as root: sudo chair-agent doctor --config ${config}\n`);
    // Not "not set" for secrets that are set: it cannot tell, and says so.
    const list = await runAs(NOBODY, ['secrets', 'list', '--config', config]);
    expect(list.code).toBe(1);
    expect(list.stdout).toBe('');
    expect(list.stderr).toBe(`chair-agent: cannot read ${credentials} (permission denied); run it as root: sudo chair-agent secrets list --config ${config}\n`);
    expect(statSync(etc).uid).toBe(0);
  });
});

describe('chair-agent secrets', () => {
  it('set reads the value from stdin into a 0600 file, list says which are set and never shows a value', async () => {
    const { config, credentials } = siteEtc();
    const set = await runAs(process.getuid?.() ?? 0, ['secrets', 'set', 'vendor-api-key', '--config', config], 'piped-key-value-0004\n');
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toContain(`stored vendor-api-key in ${credentials}`);
    const file = join(credentials, 'vendor-api-key');
    expect(readFileSync(file, 'utf8')).toBe('piped-key-value-0004');
    expect(statSync(file).mode & 0o777).toBe(0o600);

    const list = await runCli(['secrets', 'list', '--config', config]);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^vendor-api-key\s+set$/m);
    expect(list.stdout).toMatch(/^webhook-secret\s+not set$/m);
    expect(`${set.stdout}${set.stderr}${list.stdout}`).not.toContain('piped-key-value-0004');

    // With the webhook secret stored as well, the config is complete, as the service will see it.
    expect((await runAs(process.getuid?.() ?? 0, ['secrets', 'set', 'webhook-secret', '--config', config], 'piped-secret-0006')).code).toBe(0);
    const check = await runCli(['check', '--config', config]);
    expect(check.code, check.stderr).toBe(0);
    expect(check.stdout).toContain('apiKey: "******** (credential vendor-api-key)"');

    const unset = await runCli(['secrets', 'unset', 'vendor-api-key', '--config', config]);
    expect(unset.code).toBe(0);
    expect(readFileSync(file, 'utf8')).toBe('');
    const empty = await runAs(process.getuid?.() ?? 0, ['secrets', 'set', 'mqtt-password', '--config', config], '');
    expect(empty.code).toBe(1);
    expect(empty.stderr).toContain('the value is empty');
  });

  it('refuses unknown names, and a user who may not write the store is told to use sudo', async () => {
    const { config } = siteEtc();
    const unknown = await runCli(['secrets', 'set', 'api-key', '--config', config]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('unknown secret "api-key"; one of vendor-api-key, webhook-secret, mqtt-password');
    if (!isRoot) return;
    chownSync(config, 0, 0);
    const denied = await runAs(NOBODY, ['secrets', 'set', 'vendor-api-key', '--config', config], 'value-0005');
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/^chair-agent: cannot write .*credentials \(permission denied\); run it as root: sudo chair-agent secrets set vendor-api-key --config /);
  });
});
