import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { parseCli } from '../../agent/cli/args.js';
import { gpioCommand } from '../../agent/cli/commands/gpio.js';
import type { CommandContext } from '../../agent/cli/context.js';
import { GpiodDriver } from '../../agent/gpio/gpiod-driver.js';
import { silentLogger } from '../../agent/platform/logger.js';
import { FakeClock, settle } from '../helpers/fake-clock.js';
import { FakeGpiod } from '../helpers/fake-gpiod.js';

function setup(fixture: string) {
  const dir = mkdtempSync(join(tmpdir(), 'wiring-'));
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    `site: {id: wiring}
vendor: {baseUrl: "http://127.0.0.1:9", apiKey: k-1}
webhook: {enabled: false}
gpio:
  driver: gpiod
  statusLed: 5
  chairs:
    - {deviceId: MC7001, button: 17, led: 27}
    - {deviceId: MC7002, button: 22, led: 23}
`,
  );
  const clock = new FakeClock();
  const kernel = new FakeGpiod(fixture, clock);
  const driver = new GpiodDriver({ logger: silentLogger(), devDir: kernel.devDir, binding: kernel, bias: 'pull-up' });
  let out = '';
  let err = '';
  const stop = new AbortController();
  const ctx = {
    env: {},
    stdout: (t: string) => void (out += t),
    stderr: (t: string) => void (err += t),
    signal: stop.signal,
    input: process.stdin,
    inputIsTTY: false,
    stdoutIsTTY: false,
    pid: 1,
  } as CommandContext;
  return { config, clock, kernel, driver, ctx, stop, output: () => out, errors: () => err };
}

describe('chair-agent gpio, the wiring test', () => {
  it('lists each line as the kernel has it, lights each LED in turn, prints every press with its hold time, and releases everything on Ctrl-C', async () => {
    const { config, clock, kernel, driver, ctx, stop, output } = setup('pi5b-bookworm-early.txt');
    const run = gpioCommand(parseCli(['gpio', '--blink', '--config', config]), ctx, { driver, clock });
    // The config is read and validated first (a module loaded on demand): the table follows.
    await vi.waitFor(() => expect(output()).toContain('gpiod driver;'), { timeout: 15_000 });
    await settle();
    expect(output()).toContain(`gpiod driver; the lines as the kernel has them:

chair   role        BCM  chip       line  name    bias     level
agent   status LED  5    gpiochip4  5     GPIO5   -        off
MC7001  button      17   gpiochip4  17    GPIO17  pull-up  released
MC7001  LED         27   gpiochip4  27    GPIO27  -        off
MC7002  button      22   gpiochip4  22    GPIO22  pull-up  released
MC7002  LED         23   gpiochip4  23    GPIO23  -        off
`);
    expect(output()).toContain('Lighting each LED for 1 s:\n  status LED (BCM 5): on');
    expect(kernel.requestAt('gpiochip4', 5)?.writes.at(-1)).toBe(1);
    await clock.advance(1_000);
    expect(kernel.requestAt('gpiochip4', 5)?.writes.at(-1)).toBe(0);
    expect(kernel.requestAt('gpiochip4', 27)?.writes.at(-1)).toBe(1);
    await clock.advance(2_000);
    expect(output()).toContain('  status LED (BCM 5): on, off\n  LED of MC7001 (BCM 27): on, off\n  LED of MC7002 (BCM 23): on, off\n');
    expect(output()).toContain('Watching 2 button(s): press each one; Ctrl-C to stop.');

    await kernel.press('gpiochip4', 22, 420, (ms) => clock.advance(ms));
    expect(output()).toMatch(/ {2}MC7002 button \(BCM 22\): pressed\n {2}MC7002 button \(BCM 22\): released, held 0\.4\d s\n/);
    stop.abort();
    expect(await run).toBe(0);
    expect(output()).toMatch(/lines released\n$/);
    expect(kernel.open).toBe(0);
  });

  it('refuses while the service holds the lines, naming the command that frees them', async () => {
    const { config, kernel, driver, ctx, errors } = setup('pi4b-bookworm.txt');
    const service = new GpiodDriver({ logger: silentLogger(), devDir: kernel.devDir, binding: kernel, bias: 'pull-up' });
    await service.init();
    service.openInput(17, { activeLow: true, debounceMs: 30 }, () => undefined);
    expect(await gpioCommand(parseCli(['gpio', '--config', config]), ctx, { driver })).toBe(1);
    expect(errors()).toBe('chair-agent: the chair-agent service holds the GPIO lines: sudo systemctl stop chair-agent, run chair-agent gpio again, then sudo systemctl start chair-agent\n');
    service.close();
  });

  it('shows a line another consumer holds as unusable, and says why', async () => {
    const { config, driver, ctx, stop, output } = setup('pi3b-bookworm.txt');
    writeFileSync(config, `site: {id: wiring}\nvendor: {baseUrl: "http://127.0.0.1:9", apiKey: k-1}\nwebhook: {enabled: false}\ngpio: {driver: gpiod, chairs: [{deviceId: MC7001, button: 4, led: 27}]}\n`);
    stop.abort();
    expect(await gpioCommand(parseCli(['gpio', '--config', config]), ctx, { driver })).toBe(1);
    expect(output()).toMatch(/MC7001\s+button\s+4\s+gpiochip0\s+4\s+GPIO_GCLK\s+\S+\s+UNUSABLE/);
    expect(output()).toContain('PROBLEM button of MC7001 (BCM 4): BCM 4 (gpiochip0 line 4, named GPIO_GCLK) is used by "onewire@0"');
  });
});
