import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { statfsSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import { build } from '../../agent/build.js';
import { silentLogger } from '../../agent/platform/logger.js';
import { volatileStorage } from '../../agent/store/volatile-storage.js';
import { testConfig } from '../helpers/config.js';
import { runCli } from '../helpers/cli.js';

/**
 * A database on a file system a power cut empties (Raspberry Pi OS's overlay, tmpfs) is reported
 * by /healthz and doctor with what to change. /dev/shm is a tmpfs on Linux: it stands for the
 * overlay's RAM here, outside the temporary directory (which tests and demos may use freely).
 */
const SHM = '/dev/shm';
const shmIsTmpfs = ((): boolean => {
  try {
    return Number(statfsSync(SHM).type) === 0x01021994;
  } catch {
    return false;
  }
})();
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe.skipIf(!shmIsTmpfs)('a database on a volatile file system', () => {
  it('is named, with what to change; one in memory or in the temporary directory is meant to be thrown away', () => {
    expect(volatileStorage(join(SHM, 'x', 'agent.db'))).toBeNull(); // no such directory: nothing to ask
    const dir = mkdtempSync(join(SHM, 'volatile-'));
    dirs.push(dir);
    expect(volatileStorage(join(dir, 'agent.db'))).toMatchObject({ fileSystem: 'tmpfs', advice: expect.stringContaining('Put storage.path on a persistent file system') });
    expect(volatileStorage(':memory:')).toBeNull();
    expect(volatileStorage(join(mkdtempSync(join(tmpdir(), 'durable-')), 'agent.db'))).toBeNull();
  });

  it('makes /healthz say the database is not safe, and why, while the agent keeps working', async () => {
    const dir = mkdtempSync(join(SHM, 'volatile-'));
    dirs.push(dir);
    const agent = build(testConfig({ vendorUrl: 'http://127.0.0.1:9', brokerUrl: 'mqtt://127.0.0.1:9', dbPath: join(dir, 'agent.db') }), { logger: silentLogger() });
    await agent.start();
    try {
      const res = await fetch(`http://127.0.0.1:${agent.http.address().port}/healthz`);
      expect(res.status).toBe(503);
      const body = (await res.json()) as { checks: Record<string, { ok: boolean; detail: string }> };
      expect(body.checks['database']).toMatchObject({ ok: false, detail: expect.stringMatching(/^writable, but volatile: .* is on tmpfs, in RAM: waiting transactions are lost at the next power cut/) });
    } finally {
      await agent.stop();
    }
  });

  it('fails doctor\'s database line with the hint', async () => {
    const dir = mkdtempSync(join(SHM, 'volatile-'));
    dirs.push(dir);
    const config = join(mkdtempSync(join(tmpdir(), 'volatile-config-')), 'config.yaml');
    writeFileSync(config, `site: {id: shm}\nvendor: {baseUrl: "http://127.0.0.1:9", apiKey: k-0123456789}\nwebhook: {enabled: false}\nmqtt: {url: "mqtt://127.0.0.1:9"}\nstorage: {path: ${join(dir, 'agent.db')}}\ngpio: {driver: sim}\n`);
    const r = await runCli(['doctor', '--config', config]);
    expect(r.stdout).toMatch(/FAIL\s+database\s+.*on tmpfs, emptied by a power cut\n\s+hint: .*Put storage.path on a persistent file system/);
  });
});
