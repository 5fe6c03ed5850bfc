import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runDoctor } from '../../agent/cli/commands/doctor.js';
import { validateConfig } from '../../agent/config/load.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { runCli } from '../helpers/cli.js';
import { freePort } from '../helpers/ports.js';
import { itWith } from '../helpers/tools.js';

const KEY = 'doctor-key-123456';
const SECRET = 'doctor-secret-7890';
let broker: TestBroker;
let sim: Simulator;
let dir: string;

beforeAll(async () => {
  broker = await startBroker();
  sim = new Simulator({ apiKey: KEY });
  await sim.start();
  dir = mkdtempSync(join(tmpdir(), 'doctor-'));
});
afterAll(async () => {
  await sim.close();
  await broker.stop();
});

function configFile(name: string, brokerUrl: string, extra = ''): string {
  const path = join(dir, `${name}.yaml`);
  writeFileSync(
    path,
    `site: {id: doc}
vendor: {baseUrl: "${sim.url}", apiKey: ${KEY}}
webhook: {channelSecret: ${SECRET}}
mqtt: {url: "${brokerUrl}"}
storage: {path: ${join(dir, `${name}.db`)}}
${extra}`,
  );
  return path;
}

describe('chair-agent doctor', () => {
  itWith('mosquitto', 'says ok on every line when everything is reachable', async () => {
    const r = await runCli(['doctor', '--config', configFile('good', broker.url, 'gpio: {driver: sim, chairs: [{deviceId: MC7001, button: 17, led: 27}]}\n')]);
    expect(r.code, r.stdout).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines.map((l) => l.slice(0, 16).trim())).toEqual(['ok    config', 'ok    database', 'ok    vendor API', 'ok    locations', 'ok    clock', 'ok    broker', 'ok    refusals', 'ok    gpio']);
    expect(r.stdout).toContain('4 chair(s) listed');
    expect(r.stdout).toMatch(/^ok {4}locations {3}the key sees: Ladprao Mall \(4\)$/m);
  });

  itWith('mosquitto', 'says the broker keeps no retained messages, and passes it', async () => {
    const noRetain = await startBroker({ extra: 'retain_available false\n' });
    try {
      const r = await runCli(['doctor', '--config', configFile('noretain', noRetain.url)]);
      expect(r.code, r.stdout).toBe(0);
      expect(r.stdout).toMatch(/^ok {4}broker /m);
      expect(r.stdout).toMatch(/^ok {4}retain {6}the broker keeps no retained messages \(Mosquitto: retain_available false\): the agent publishes its state, availability and discovery without retain/m);
    } finally {
      await noRetain.stop();
    }
  });

  it('says the broker is down and how to fix it', async () => {
    const port = await freePort();
    const r = await runCli(['doctor', '--config', configFile('nobroker', `mqtt://127.0.0.1:${port}`)]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^FAIL {2}broker {6}mqtt:\/\/127\.0\.0\.1:\d+: connect ECONNREFUSED/m);
    expect(r.stdout).toContain('hint: nothing listens there: is Mosquitto running (systemctl status mosquitto)? check mqtt.url host and port');
    expect(r.stdout).toMatch(/^ok {4}vendor API/m);
  });

  it('says the vendor refused the key, without printing it', async () => {
    const path = join(dir, 'badkey.yaml');
    writeFileSync(path, `site: {id: doc}\nvendor: {baseUrl: "${sim.url}", apiKey: wrong-key-424242}\nwebhook: {channelSecret: ${SECRET}}\nmqtt: {url: "${broker.url}"}\nstorage: {path: ${join(dir, 'badkey.db')}}\n`);
    const r = await runCli(['doctor', '--config', path]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^FAIL {2}vendor API .*vendor rejected the Apikey \(HTTP 401\)/m);
    expect(r.stdout).toContain('hint: the vendor refused the key');
    expect(r.stdout + r.stderr).not.toContain('wrong-key-424242');
    expect(r.stdout + r.stderr).not.toContain(SECRET);
  });

  it('exits 78 with the config line failing when the config is invalid', async () => {
    const path = join(dir, 'invalid.yaml');
    writeFileSync(path, 'site: {id: "No Good"}\n');
    const r = await runCli(['doctor', '--config', path]);
    expect(r.code).toBe(78);
    expect(r.stdout).toMatch(/^FAIL {2}config/);
    expect(r.stderr).toContain('site.id: must match [a-z0-9_-]+');
  });

  it('checks GPIO without claiming lines: base found from the chips, or what is missing', async () => {
    const config = (gpio: Record<string, unknown>) =>
      validateConfig(
        {
          site: { id: 'doc' },
          vendor: { baseUrl: sim.url, apiKey: KEY },
          webhook: { channelSecret: SECRET },
          mqtt: { url: broker.url },
          storage: { path: join(dir, 'gpio.db') },
          gpio: { driver: 'onoff', chairs: [{ deviceId: 'MC7001', button: 17, led: 27 }], ...gpio },
        },
        'c',
        { env: {} },
      ).config;
    const sysfs = mkdtempSync(join(tmpdir(), 'sysfs-'));
    const gpioLine = async (root: string, gpio: Record<string, unknown> = {}) =>
      (await runDoctor(config(gpio), 'c', { sysfsRoot: root, brokerTimeoutMs: 2000 })).find((l) => l.name === 'gpio');
    expect(await gpioLine(sysfs)).toMatchObject({ ok: false, detail: expect.stringContaining('no sysfs GPIO on this machine') });
    writeFileSync(join(sysfs, 'export'), '');
    mkdirSync(join(sysfs, 'gpiochip512'));
    writeFileSync(join(sysfs, 'gpiochip512/base'), '512\n');
    writeFileSync(join(sysfs, 'gpiochip512/label'), 'pinctrl-bcm2711\n');
    writeFileSync(join(sysfs, 'gpiochip512/ngpio'), '58\n');
    expect(await gpioLine(sysfs)).toMatchObject({ ok: true, detail: 'sysfs writable; BCM 0 is sysfs 512 (gpiochip512 (pinctrl-bcm2711)); 2 line(s): BCM 17, 27' });
    expect(await gpioLine(sysfs, { chipBase: 0 })).toMatchObject({ ok: true, detail: expect.stringContaining('BCM 0 is sysfs 0 (gpio.chipBase)') });
  });
});
