import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Simulator } from '../../agent/simulator/simulator.js';
import { AgentProcess } from '../helpers/agent-process.js';
import { runCli } from '../helpers/cli.js';
import { startMicrosocks, startTinyproxy, tlsFront, type SiteProxy } from '../helpers/site-proxies.js';
import { issueServerCertificate } from '../helpers/test-ca.js';
import { describeWith } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';

// A site that reaches the internet only through its HTTP proxy (an airport's, a mall's), as
// Debian's tinyproxy serves one: vendor.proxy, or HTTPS_PROXY/NO_PROXY in the environment.
// The real vendor is https://, reached through CONNECT; an http:// one in absolute form.

const KEY = 'proxy-key-123456';
const SECRET = 'proxy-secret-7890';
const PROXY_PASSWORD = 'pr0xy-pass-2468';
let dir: string;
let sim: Simulator;
/** The vendor over HTTPS: TLS in front of the simulator, with a private CA. */
let front: Server;
let frontPort: number;

let open: SiteProxy;
let guarded: SiteProxy;

function config(name: string, vendor: string): string {
  const path = join(dir, `${name}.yaml`);
  writeFileSync(path, `site: {id: proxied}\nvendor: {${vendor}, apiKey: ${KEY}}\nwebhook: {channelSecret: ${SECRET}}\nmqtt: {url: "mqtt://127.0.0.1:1"}\nstorage: {path: ${join(dir, `${name}.db`)}}\n`);
  return path;
}

const vendorLine = (stdout: string): string => stdout.split('\n').find((l) => /^(ok|FAIL)\s+vendor API/.test(l)) ?? `(no vendor line)\n${stdout}`;

describeWith(['tinyproxy', 'openssl'], 'the vendor through the site\'s HTTP proxy (tinyproxy)', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'proxy-'));
    chmodSync(dir, 0o755);
    sim = new Simulator({ apiKey: KEY, chairs: 2 });
    await sim.start();
    issueServerCertificate(dir, { caName: 'vendor-ca', name: 'vendor', cn: '127.0.0.1', altNames: 'IP:127.0.0.1' });
    const simPort = Number(new URL(sim.url).port);
    ({ server: front, port: frontPort } = await tlsFront(join(dir, 'vendor.pem'), join(dir, 'vendor.key'), simPort));
    open = await startTinyproxy(dir, 'open');
    guarded = await startTinyproxy(dir, 'guarded', `BasicAuth agent ${PROXY_PASSWORD}\n`);
  });
  afterAll(async () => {
    open?.child.kill();
    guarded?.child.kill();
    front?.close();
    await sim?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('an https:// vendor through HTTPS_PROXY from the environment: a CONNECT tunnel, and check says where the proxy came from', async () => {
    const path = config('env', `baseUrl: "https://127.0.0.1:${frontPort}"`);
    const env = { HTTPS_PROXY: `127.0.0.1:${open.port}`, NODE_EXTRA_CA_CERTS: join(dir, 'ca.pem') };
    const r = await runCli(['doctor', '--config', path], env);
    expect(vendorLine(r.stdout)).toMatch(/^ok {4}vendor API {2}.*2 chair\(s\) listed/);
    await waitFor(() => open.log().includes(`CONNECT 127.0.0.1:${frontPort}`) || undefined, () => `the CONNECT in tinyproxy's log:\n${open.log()}`);
    const check = await runCli(['check', '--config', path], env);
    expect(check.stdout).toContain(`proxy: http://127.0.0.1:${open.port} (env HTTPS_PROXY)`);
  });

  it("a proxy only this shell has (/etc/environment, through sudo): doctor and check go the service's way and say so; the service's own is the one doctor goes through", async () => {
    // A systemctl that says what systemd gives the service (the booted-systemd check, step 7c,
    // meets the real one): first nothing, then a drop-in's proxy.
    const bin = mkdtempSync(join(dir, 'bin-'));
    const service = (environment: string): Record<string, string> => {
      writeFileSync(join(bin, 'systemctl'), `#!/bin/sh\n[ "$1" = show-environment ] && { echo PATH=/usr/bin; exit 0; }\nprintf 'LoadState=loaded\\nEnvironment=${environment}\\n'\n`, { mode: 0o755 });
      return { PATH: `${bin}:${process.env['PATH'] ?? ''}`, NODE_EXTRA_CA_CERTS: join(dir, 'ca.pem') };
    };
    const path = config('service-env', `baseUrl: "https://127.0.0.1:${frontPort}"`);
    const tunnels = (): number => open.log().split(`CONNECT 127.0.0.1:${frontPort}`).length - 1;
    const shell = `http://127.0.0.1:${open.port}`;
    const before = tunnels();
    const direct = await runCli(['doctor', '--config', path], { ...service(''), https_proxy: shell });
    expect(direct.stdout).toContain(`ok    proxy       this shell's https_proxy (${shell}) is not the service's: systemd gives a service no login environment`);
    expect(direct.stdout).toContain(`hint: to give it to the service: sudo systemctl edit chair-agent, then [Service] and Environment=HTTPS_PROXY=${shell}`);
    expect(vendorLine(direct.stdout)).toMatch(/^ok {4}vendor API/);
    const check = await runCli(['check', '--config', path], { ...service(''), https_proxy: shell });
    expect(check.stdout).toContain(`# as the service reads it: this shell's https_proxy (${shell}) is not in the environment systemd gives the service`);
    expect(check.stdout).not.toContain('proxy: http');
    expect(tunnels()).toBe(before);
    const through = await runCli(['doctor', '--config', path], service(`HTTPS_PROXY=${shell}`));
    expect(through.stdout).toContain(`ok    proxy       the vendor checked through the service's HTTPS_PROXY (${shell}`);
    expect(vendorLine(through.stdout)).toMatch(/^ok {4}vendor API/);
    await waitFor(() => (tunnels() > before ? true : undefined), () => `the CONNECT in tinyproxy's log:\n${open.log()}`);
  });

  it('NO_PROXY takes the vendor off the proxy', async () => {
    const path = config('noproxy', `baseUrl: "https://127.0.0.1:${frontPort}"`);
    // A proxy nothing listens on: only a direct connection can list the chairs.
    const r = await runCli(['doctor', '--config', path], { HTTPS_PROXY: 'http://127.0.0.1:1', NO_PROXY: 'localhost,127.0.0.1', NODE_EXTRA_CA_CERTS: join(dir, 'ca.pem') });
    expect(vendorLine(r.stdout)).toMatch(/^ok {4}vendor API/);
  });

  it('an http:// vendor through vendor.proxy goes in absolute form', async () => {
    const r = await runCli(['doctor', '--config', config('plain', `baseUrl: "${sim.url}", proxy: "http://127.0.0.1:${open.port}"`)]);
    expect(vendorLine(r.stdout)).toMatch(/^ok {4}vendor API/);
    await waitFor(() => open.log().includes(`GET ${sim.url}/api/chair/lists`) || undefined, () => `the GET in tinyproxy's log:\n${open.log()}`);
  });

  it('a proxy that wants credentials: doctor says so for either scheme; with them in vendor.proxy it works, and the password is never printed', async () => {
    const env = { NODE_EXTRA_CA_CERTS: join(dir, 'ca.pem') };
    for (const baseUrl of [`https://127.0.0.1:${frontPort}`, sim.url]) {
      const bare = await runCli(['doctor', '--config', config('noauth', `baseUrl: "${baseUrl}", proxy: "http://127.0.0.1:${guarded.port}"`)], env);
      expect(vendorLine(bare.stdout)).toMatch(/^FAIL {2}vendor API .*wants credentials.*user:password@ in vendor\.proxy/);
      expect(bare.stdout).toContain(`hint: check vendor.proxy (http://127.0.0.1:${guarded.port}) and that it lets this box reach`);
    }
    const path = config('auth', `baseUrl: "https://127.0.0.1:${frontPort}", proxy: "http://agent:${PROXY_PASSWORD}@127.0.0.1:${guarded.port}"`);
    const r = await runCli(['doctor', '--config', path], env);
    expect(vendorLine(r.stdout)).toMatch(/^ok {4}vendor API/);
    const check = await runCli(['check', '--config', path], env);
    expect(check.stdout).toContain(`proxy: http://agent:********@127.0.0.1:${guarded.port}/`);
    expect(r.stdout + r.stderr + check.stdout + check.stderr).not.toContain(PROXY_PASSWORD);
  });
});

describeWith(['microsocks', 'openssl'], "the vendor through the site's SOCKS5 proxy (microsocks with a login)", () => {
  // A password as a site's IT writes it, with a % that starts no escape: taken as curl takes it.
  const SOCKS_PASSWORD = 'Spa50%off!';
  let socks: SiteProxy;
  let socksDir: string;
  let socksSim: Simulator;
  let tls: Server;
  let tlsPort: number;
  beforeAll(async () => {
    socksDir = mkdtempSync(join(tmpdir(), 'socks-'));
    socksSim = new Simulator({ apiKey: KEY, chairs: 2 });
    await socksSim.start();
    const run = (args: string[]): void => void spawnSync('openssl', args, { cwd: socksDir });
    run(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost', '-keyout', 'vendor.key', '-out', 'vendor.pem']);
    ({ server: tls, port: tlsPort } = await tlsFront(join(socksDir, 'vendor.pem'), join(socksDir, 'vendor.key'), Number(new URL(socksSim.url).port)));
    socks = await startMicrosocks({ user: 'site', password: SOCKS_PASSWORD });
  });
  afterAll(async () => {
    socks?.child.kill();
    tls?.close();
    await socksSim?.close();
    rmSync(socksDir, { recursive: true, force: true });
  });

  const socksConfig = (name: string, proxy: string): string => {
    const path = join(socksDir, `${name}.yaml`);
    writeFileSync(path, `site: {id: socks}\nvendor: {baseUrl: "https://localhost:${tlsPort}", apiKey: ${KEY}, proxy: "${proxy}"}\nwebhook: {channelSecret: ${SECRET}}\nmqtt: {url: "mqtt://127.0.0.1:1"}\nstorage: {path: ${join(socksDir, `${name}.db`)}}\n`);
    return path;
  };
  const env = (): Record<string, string> => ({ NODE_EXTRA_CA_CERTS: join(socksDir, 'vendor.pem') });

  it('with the login in vendor.proxy, doctor reaches the https:// vendor by name through it; without it, or wrong, doctor says which', async () => {
    const withLogin = (password: string): string => socks.url.replace('socks5://', `socks5://site:${password}@`);
    const ok = await runCli(['doctor', '--config', socksConfig('login', withLogin(SOCKS_PASSWORD))], env());
    expect(vendorLine(ok.stdout)).toMatch(/^ok {4}vendor API {2}https:\/\/localhost:\d+ answered with the key: 2 chair/);
    // The proxy resolved the vendor's name and connected for a client that logged in.
    expect(socks.log()).toMatch(/connected to localhost:\d+/);
    const none = await runCli(['doctor', '--config', socksConfig('none', socks.url)], env());
    expect(vendorLine(none.stdout)).toContain(`the proxy ${socks.url} did not connect to localhost:${tlsPort} (SOCKS5: it wants credentials, user:password@ in vendor.proxy)`);
    const wrong = await runCli(['doctor', '--config', socksConfig('wrong', withLogin('wrong-pass'))], env());
    expect(vendorLine(wrong.stdout)).toContain('(SOCKS5: it refused the user and password in vendor.proxy)');
    expect(ok.stdout + ok.stderr + none.stdout + wrong.stdout + wrong.stderr).not.toContain(SOCKS_PASSWORD);
    expect(wrong.stdout + wrong.stderr).not.toContain('wrong-pass');
    // Node.js's note that undici's SOCKS5 is experimental is not part of doctor's report.
    expect(ok.stderr).toBe('');
  });

  it('the built agent polls through it, and the journal gets only JSON lines: Node.js\'s note that SOCKS5 is experimental is one of them', async () => {
    const path = socksConfig('run', socks.url.replace('socks5://', `socks5://site:${encodeURIComponent('Spa50%off!')}@`));
    const agent = AgentProcess.start(['run', '--config', path], env());
    try {
      await agent.waitForLog((l) => l.msg === 'vendor API reachable', 'polled through the SOCKS5 proxy');
      const note = await agent.waitForLog((l) => l['component'] === 'node', "Node.js's warning as a log line");
      expect(note).toMatchObject({ level: 'info', warning: 'ExperimentalWarning' });
      expect(await agent.signal('SIGTERM')).toBe(0);
      expect(agent.stderr).toBe('');
      expect(agent.raw.split('\n').filter((l) => l !== '' && !l.startsWith('{'))).toEqual([]);
    } finally {
      await agent.signal('SIGTERM');
    }
  });
});
