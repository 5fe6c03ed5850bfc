import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GpiodDriver } from '../../agent/gpio/gpiod-driver.js';
import { GpioError } from '../../agent/gpio/gpio-driver.js';
import { silentLogger } from '../../agent/platform/logger.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { FakeGpiod } from '../helpers/fake-gpiod.js';

async function driverFor(fixture: string) {
  const clock = new FakeClock();
  const kernel = new FakeGpiod(fixture, clock);
  const driver = new GpiodDriver({ logger: silentLogger(), devDir: kernel.devDir, binding: kernel, bias: 'pull-up' });
  await driver.init();
  return { clock, kernel, driver };
}

async function failure(p: Promise<unknown> | (() => unknown)): Promise<GpioError> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (err) {
    expect(err).toBeInstanceOf(GpioError);
    return err as GpioError;
  }
  throw new Error('expected a GpioError');
}

describe('the gpiod driver finds every line by name, whatever the board', () => {
  it.each([
    // board, BCM, chip, offset, the kernel's name, how it was found
    ['pi3b-bookworm.txt', 17, 'gpiochip0', 17, 'GPIO17', 'name'],
    ['pi3b-bookworm.txt', 9, 'gpiochip0', 9, 'SPI_MISO', 'header-offset'],
    ['pi3b-bookworm.txt', 14, 'gpiochip0', 14, 'TXD1', 'header-offset'],
    ['pi4b-bookworm.txt', 9, 'gpiochip0', 9, 'GPIO9', 'name'],
    ['pi4b-bookworm.txt', 27, 'gpiochip0', 27, 'GPIO27', 'name'],
    ['pi5b-trixie.txt', 17, 'gpiochip0', 17, 'GPIO17', 'name'],
    ['pi5b-bookworm-early.txt', 17, 'gpiochip4', 17, 'GPIO17', 'name'],
    ['pi5b-bookworm-early.txt', 5, 'gpiochip4', 5, 'GPIO5', 'name'],
    ['cm5-trixie.txt', 22, 'gpiochip0', 22, 'GPIO22', 'name'],
  ])('%s: BCM %i is %s line %i (%s, by %s)', async (fixture, bcm, chip, offset, name, found) => {
    const { driver } = await driverFor(fixture);
    expect(driver.resolve(bcm)).toMatchObject({ chip: { name: chip }, offset, name, found });
    expect(driver.inspect(bcm)).toMatchObject({ chip, offset, name, found });
  });

  it('requests a button with the bias, active-low, both edges and the kernel debounce, and an LED as an output at 0, under the label chair-agent', async () => {
    const { driver, kernel } = await driverFor('pi5b-bookworm-early.txt');
    driver.openInput(17, { activeLow: true, debounceMs: 30, bias: 'pull-up' }, () => undefined);
    driver.openOutput(27);
    expect(kernel.requestAt('gpiochip4', 17)?.config).toEqual({ consumer: 'chair-agent', direction: 'input', activeLow: true, bias: 'pull-up', edge: 'both', debounceUs: 30_000 });
    expect(kernel.requestAt('gpiochip4', 27)?.config).toEqual({ consumer: 'chair-agent', direction: 'output', value: 0 });
    expect(driver.inspect(17)).toMatchObject({ consumer: 'chair-agent', bias: 'pull-up' });
    driver.close();
    expect(kernel.open).toBe(0);
  });

  it('a press is one event however the contact bounces, with its hold time', async () => {
    const { driver, kernel, clock } = await driverFor('pi4b-bookworm.txt');
    const presses: number[] = [];
    const edges: [boolean, number][] = [];
    driver.openInput(17, { activeLow: true, debounceMs: 30 }, () => presses.push(clock.monotonic()), (pressed, at) => edges.push([pressed, at]));
    await kernel.press('gpiochip0', 17, 400, (ms) => clock.advance(ms));
    expect(presses).toHaveLength(1);
    expect(edges.map(([p]) => p)).toEqual([true, false]);
    const held = (edges[1]?.[1] ?? 0) - (edges[0]?.[1] ?? 0);
    expect(held).toBeGreaterThanOrEqual(395);
    expect(held).toBeLessThanOrEqual(410);
  });

  it('a chip that goes away: the line is released, its owner is told, and no press comes from it', async () => {
    const { driver, kernel, clock } = await driverFor('pi4b-bookworm.txt');
    const presses: number[] = [];
    const failures: GpioError[] = [];
    driver.openInput(17, { activeLow: true, debounceMs: 30, onFailure: (e) => failures.push(e) }, () => presses.push(clock.monotonic()));
    const led = driver.openOutput(27);
    expect(kernel.open).toBe(2);
    kernel.removeChip('gpiochip0');
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatchObject({ code: 'GPIO_FAILED', message: expect.stringMatching(/^BCM 17 \(gpiochip0 line 17\) stopped working \(ENODEV: .*\); the button is dead until the agent restarts/) });
    expect(kernel.open).toBe(1);
    expect(kernel.requestAt('gpiochip0', 17)).toBeUndefined();
    await kernel.press('gpiochip0', 17, 200, (ms) => clock.advance(ms));
    expect(presses).toEqual([]);
    led.close();
  });

  it('says when the kernel dropped button events, and still counts the presses it reports', async () => {
    const clock = new FakeClock();
    const kernel = new FakeGpiod('pi4b-bookworm.txt', clock);
    const { memoryLogger } = await import('../helpers/memory-logger.js');
    const { logger, lines } = memoryLogger('warn');
    const driver = new GpiodDriver({ logger, devDir: kernel.devDir, binding: kernel, bias: 'pull-up' });
    await driver.init();
    let presses = 0;
    driver.openInput(17, { activeLow: true, debounceMs: 30 }, () => presses++);
    await kernel.press('gpiochip0', 17, 200, (ms) => clock.advance(ms));
    expect(lines.filter((l) => l.msg.includes('lost'))).toEqual([]);
    kernel.dropEvents('gpiochip0', 17, 6);
    await kernel.press('gpiochip0', 17, 200, (ms) => clock.advance(ms));
    expect(presses).toBe(2);
    expect(lines.find((l) => l.msg.includes("button events lost: the kernel's event buffer overflowed"))).toMatchObject({ bcm: 17, lost: 6 });
  });

  it('a line that cannot be watched is released and refused with the reason', async () => {
    const { driver, kernel } = await driverFor('pi4b-bookworm.txt');
    kernel.watchFails = 'EBADF';
    const err = await failure(() => driver.openInput(17, { activeLow: true, debounceMs: 30 }, () => undefined));
    expect(err).toMatchObject({ code: 'GPIO_FAILED', message: expect.stringContaining('BCM 17 (gpiochip0 line 17): cannot watch it') });
    expect(kernel.open).toBe(0);
  });

  it('a line held by another consumer is refused, naming it', async () => {
    const { driver } = await driverFor('pi3b-bookworm.txt');
    const err = await failure(() => driver.openInput(4, { activeLow: true, debounceMs: 30 }, () => undefined));
    expect(err.code).toBe('GPIO_BUSY');
    expect(err.message).toBe('BCM 4 (gpiochip0 line 4, named GPIO_GCLK) is used by "onewire@0": an overlay in /boot/firmware/config.txt, or a program; pick another pin');
  });

  it('a line the chair-agent service already holds is refused with the command that frees it', async () => {
    const { driver, kernel } = await driverFor('pi5b-trixie.txt');
    const other = new GpiodDriver({ logger: silentLogger(), devDir: kernel.devDir, binding: kernel, bias: 'pull-up' });
    await other.init();
    other.openOutput(27);
    const err = await failure(() => driver.openOutput(27));
    expect(err.message).toContain('the chair-agent service holds it: sudo systemctl stop chair-agent');
  });

  it('says what to fix when the chips cannot be opened, or there are none, or the addon is missing', async () => {
    const clock = new FakeClock();
    const kernel = new FakeGpiod('pi4b-bookworm.txt', clock);
    kernel.denied = true;
    const denied = await failure(new GpiodDriver({ logger: silentLogger(), devDir: kernel.devDir, binding: kernel, bias: 'pull-up' }).init());
    expect(denied.code).toBe('GPIO_PERMISSION');
    expect(denied.message).toContain('group gpio');
    expect(denied.message).toContain('DeviceAllow=char-gpiochip rw');

    const none = await failure(new GpiodDriver({ logger: silentLogger(), devDir: mkdtempSync(join(tmpdir(), 'nodev-')), binding: kernel, bias: 'pull-up' }).init());
    expect(none.code).toBe('GPIO_UNAVAILABLE');
    expect(none.message).toMatch(/no GPIO character device \(.*\/gpiochip\*\)/);

    const missing = await failure(
      new GpiodDriver({
        logger: silentLogger(),
        bias: 'pull-up',
        binding: () => {
          throw new Error("Cannot find module 'chair_gpiod.node'");
        },
      }).init(),
    );
    expect(missing.code).toBe('GPIO_UNAVAILABLE');
    expect(missing.message).toContain('the gpiod addon cannot be loaded');
  });
});

describe('the press-to-start path and the LED patterns on a fake clock, through the gpiod driver', () => {
  it('press: one control call, the LED fast-blinks while the start is confirmed, then slow-blinks while the chair runs', async () => {
    const { Metrics } = await import('../../agent/observe/metrics.js');
    const { ChairRegistry } = await import('../../agent/core/chair-registry.js');
    const { Health } = await import('../../agent/observe/health.js');
    const { StartService } = await import('../../agent/start/start-service.js');
    const { LedController } = await import('../../agent/gpio/leds.js');
    const { Buttons } = await import('../../agent/gpio/buttons.js');
    const { Indicators, chairLedName } = await import('../../agent/gpio/indicators.js');
    const { driver, kernel, clock } = await driverFor('cm5-trixie.txt');
    const reading = (running: boolean) => ({
      deviceId: 'MC7001', deviceCode: null, deviceName: null, location: null, status: running ? 'Running' : 'Available',
      seated: running, leftMin: running ? 4 : null, leftSec: running ? 59 : null, serverTime: null, firmwareVersion: null,
    });
    let running = false;
    const controls: string[] = [];
    const vendor = {
      listChairs: async () => ({ chairs: [reading(running)], rejected: [] }),
      chairStatus: async () => {
        await clock.sleep(20);
        return reading(running);
      },
      listTransactions: async () => ({ records: [], rejected: [], size: 0 }),
      control: async (id: string) => {
        controls.push(id);
        await clock.sleep(300);
        clock.setTimeout(() => (running = true), 1_000); // the chair reports running a second later
      },
      close: async () => undefined,
    };
    const registry = new ChairRegistry({ timeZone: 'UTC', availableStatuses: ['Available'], staleAfterMs: 60_000, forgetAfterMs: 3_600_000, expected: ['MC7001'] });
    registry.applyList([reading(false)], clock.monotonic());
    const health = new Health(clock);
    const starts = new StartService({ vendor, registry, clock, logger: silentLogger(), minutesFor: () => 5, confirmTimeoutMs: 20_000, confirmIntervalMs: 500 });
    const leds = new LedController({ driver, clock, logger: silentLogger(), specs: [{ name: chairLedName('MC7001'), pin: 27 }], ready: () => true });
    const buttons = new Buttons({ driver, ready: () => true, specs: [{ deviceId: 'MC7001', pin: 17 }], input: { activeLow: true, debounceMs: 30 }, starts, logger: silentLogger(), metrics: new Metrics({ defaultMetrics: false }) });
    const indicators = new Indicators({ leds, registry, starts, health, chairs: ['MC7001'] });
    for (const c of [leds, starts, indicators, buttons]) c.start();
    const led = (): (0 | 1)[] => kernel.requestAt('gpiochip0', 27)?.writes ?? [];
    expect(leds.shown(chairLedName('MC7001'))).toBe('on');

    await kernel.press('gpiochip0', 17, 60, (ms) => clock.advance(ms));
    expect(controls).toEqual(['MC7001']);
    expect(leds.shown(chairLedName('MC7001'))).toBe('fast');
    const duringStart = led().length;
    await clock.advance(1_000);
    expect(led().length - duringStart).toBeGreaterThanOrEqual(8); // 5 Hz: a change every 100 ms
    await clock.advance(2_000);
    expect(leds.shown(chairLedName('MC7001'))).toBe('slow');
    const whileRunning = led().length;
    await clock.advance(2_000);
    expect(led().length - whileRunning).toBe(4); // 1 Hz: a change every 500 ms
    for (const c of [buttons, indicators, starts, leds]) await c.stop();
    driver.close();
  });
});
