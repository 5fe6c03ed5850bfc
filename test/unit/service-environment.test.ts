import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { environmentFile, serviceEnvironment, shownWords } from '../../agent/cli/commands/service-environment.js';
import { proxyDifference, proxyLine, withServiceProxy } from '../../agent/cli/commands/service-proxy.js';
import type { LoadedConfig } from '../../agent/config/load.js';

// The real systemctl is met in the booted-systemd check (test/kernel/systemd-check.sh, step 7c,
// on systemd 252 and 257); these are the edges of reading what it prints.

const dir = mkdtempSync(join(tmpdir(), 'service-env-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A systemctl that answers show-environment and show as given. */
function systemctl(manager: string, unit: string): string {
  const path = join(dir, `systemctl-${Math.random().toString(36).slice(2)}`);
  writeFileSync(join(`${path}.manager`), manager);
  writeFileSync(join(`${path}.unit`), unit);
  writeFileSync(path, `#!/bin/sh\n[ "$1" = show-environment ] && exec cat '${path}.manager'\nexec cat '${path}.unit'\n`, { mode: 0o755 });
  return path;
}

const loaded = (baseUrl: string, proxy?: string, proxyVariable?: string): LoadedConfig =>
  ({ config: { vendor: { baseUrl, ...(proxy ? { proxy } : {}) } }, path: '/etc/chair-agent/config.yaml', secretSources: {}, ...(proxyVariable ? { proxyVariable } : {}) }) as unknown as LoadedConfig;

describe("the service's environment, as systemd composes it", () => {
  it('takes the manager environment, then the unit\'s Environment=, then its EnvironmentFile=s over both', () => {
    const file = join(dir, 'environment');
    writeFileSync(file, '# the site\'s\nHTTPS_PROXY="http://file:3128"\nexport NO_PROXY=ignored\n; a comment\nLANG=C.UTF-8\n');
    const env = serviceEnvironment(
      systemctl('LANG=C\nPATH=/usr/local/sbin:/usr/bin\nhttps_proxy=$\'http://u:pa\\x24s@manager:3128\'\n', `LoadState=loaded\nEnvironment=HTTPS_PROXY=http://unit:3128 "NOTE=a b"\nEnvironmentFiles=${file} (ignore_errors=yes)\nEnvironmentFiles=/nowhere (ignore_errors=yes)\n`),
    );
    expect(env).toMatchObject({ LANG: 'C.UTF-8', https_proxy: 'http://u:pa$s@manager:3128', HTTPS_PROXY: 'http://file:3128', NOTE: 'a b' });
    expect(env).not.toHaveProperty('NO_PROXY');
  });

  it('is unknown where systemd does not run or the unit is not installed', () => {
    expect(serviceEnvironment(systemctl('PATH=/usr/bin\n', 'LoadState=not-found\n'))).toBeNull();
    expect(serviceEnvironment(join(dir, 'no-systemctl-here'))).toBeNull();
  });

  it('reads the words systemctl show prints, quoted as shell words', () => {
    expect(shownWords('A=1 "B=two words" C=\'x y\' D=$\'tab\\there\' "E=q\\"uote"')).toEqual(['A=1', 'B=two words', 'C=x y', 'D=tab\there', 'E=q"uote']);
    expect(environmentFile("A='single'\nB=\"double\"\n=nothing\nnot an assignment\n")).toEqual([
      ['A', 'single'],
      ['B', 'double'],
    ]);
  });
});

describe("the vendor's proxy, this shell's and the service's", () => {
  const https = 'https://api.vendor.example';

  it("differs where /etc/environment gave the shell one the service never gets, and the check goes the service's way", () => {
    const d = proxyDifference(loaded(https, 'http://proxy.mall.lan:3128', 'https_proxy'), { https_proxy: 'http://proxy.mall.lan:3128' }, { PATH: '/usr/bin' });
    expect(d).toEqual({ own: { url: 'http://proxy.mall.lan:3128', variable: 'https_proxy' }, service: undefined });
    expect(withServiceProxy({ https_proxy: 'http://proxy.mall.lan:3128', HOME: '/root' }, { PATH: '/usr/bin' })).toEqual({ HOME: '/root' });
    const line = proxyLine(d!, false);
    expect(line).toMatchObject({ name: 'proxy', ok: false });
    expect(line.detail).toContain("this shell's https_proxy (http://proxy.mall.lan:3128) is not the service's");
    expect(line.hint).toContain('Environment=HTTPS_PROXY=http://proxy.mall.lan:3128');
    // Reachable without it: the difference is said, and does not fail doctor.
    expect(proxyLine(d!, true).ok).toBe(true);
  });

  it("says the service's own proxy was used, its password masked", () => {
    const d = proxyDifference(loaded(https), {}, { HTTPS_PROXY: 'http://site:s3cret@proxy.mall.lan:3128' });
    expect(withServiceProxy({ HOME: '/root' }, { HTTPS_PROXY: 'http://site:s3cret@proxy.mall.lan:3128' })).toEqual({ HOME: '/root', HTTPS_PROXY: 'http://site:s3cret@proxy.mall.lan:3128' });
    const line = proxyLine(d!, true);
    expect(line.detail).toMatch(/^the vendor checked through the service's HTTPS_PROXY \(http:\/\/site:\*+@proxy\.mall\.lan:3128\/?, from the environment systemd gives it\); this shell has none$/);
    expect(JSON.stringify(line)).not.toContain('s3cret');
  });

  it('is no difference where both agree, where NO_PROXY takes the vendor off both, or where the config names the proxy', () => {
    expect(proxyDifference(loaded(https, 'http://p:3128', 'HTTPS_PROXY'), { HTTPS_PROXY: 'http://p:3128' }, { https_proxy: 'http://p:3128' })).toBeNull();
    expect(proxyDifference(loaded(https), { HTTPS_PROXY: 'http://p:3128', NO_PROXY: 'vendor.example' }, {})).toBeNull();
    expect(proxyDifference(loaded(https, 'http://named:3128'), { HTTPS_PROXY: 'http://p:3128' }, {})).toBeNull();
  });
});
