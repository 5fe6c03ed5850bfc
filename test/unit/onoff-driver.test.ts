import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GpioError } from '../../agent/gpio/gpio-driver.js';
import { OnoffDriver, type OnoffGpio, type OnoffModule } from '../../agent/gpio/onoff-driver.js';
import { silentLogger } from '../../agent/platform/logger.js';

type Chip = [name: string, base: number, label: string, ngpio: number];

/** A /sys/class/gpio tree with the given chips. */
function sysfs(chips: Chip[], withExport = true): string {
  const root = mkdtempSync(join(tmpdir(), 'sysfs-'));
  if (withExport) writeFileSync(join(root, 'export'), '');
  for (const [name, base, label, ngpio] of chips) {
    mkdirSync(join(root, name));
    writeFileSync(join(root, name, 'base'), `${base}\n`);
    writeFileSync(join(root, name, 'label'), `${label}\n`);
    writeFileSync(join(root, name, 'ngpio'), `${ngpio}\n`);
  }
  return root;
}

const OLD_KERNEL: Chip[] = [['gpiochip0', 0, 'pinctrl-bcm2835', 54], ['gpiochip504', 504, 'raspberrypi-exp-gpio', 8]];
const PI4_KERNEL_66: Chip[] = [['gpiochip512', 512, 'pinctrl-bcm2711', 58], ['gpiochip570', 570, 'raspberrypi-exp-gpio', 8]];
const PI5: Chip[] = [
  ['gpiochip512', 512, 'gpio-brcmstb@107d508500', 32],
  ['gpiochip544', 544, 'gpio-brcmstb@107d517c00', 15],
  ['gpiochip559', 559, 'gpio-brcmstb@107d508500', 4],
  ['gpiochip563', 563, 'gpio-brcmstb@107d517c00', 6],
  ['gpiochip571', 571, 'pinctrl-rp1', 54],
];

interface Claimed {
  n: number;
  direction: string;
  edge: string | undefined;
  options: Record<string, unknown> | undefined;
  watchers: ((err: Error | null | undefined, v: 0 | 1) => void)[];
  writes: number[];
  unexported: boolean;
  unwatched: boolean;
}

/** A stand-in for onoff: records what the driver asks of it; can fail a line with an errno. */
function mockOnoff(accessible = true, failWith?: Record<number, string>): { mod: OnoffModule; lines: Claimed[] } {
  const lines: Claimed[] = [];
  class Gpio implements OnoffGpio {
    static accessible = accessible;
    private readonly c: Claimed;
    constructor(n: number, direction: string, edge?: string, options?: Record<string, unknown>) {
      const code = failWith?.[n];
      if (code) throw Object.assign(new Error(`${code}: write /sys/class/gpio/export`), { code });
      this.c = { n, direction, edge, options, watchers: [], writes: [], unexported: false, unwatched: false };
      lines.push(this.c);
    }
    watch(cb: Claimed['watchers'][number]): void {
      this.c.watchers.push(cb);
    }
    unwatchAll(): void {
      this.c.unwatched = true;
    }
    writeSync(v: 0 | 1): void {
      this.c.writes.push(v);
    }
    unexport(): void {
      this.c.unexported = true;
    }
  }
  return { mod: { Gpio } as unknown as OnoffModule, lines };
}

async function driverFor(chips: Chip[], opts: { chipBase?: number; accessible?: boolean; failWith?: Record<number, string>; withExport?: boolean } = {}) {
  const { mod, lines } = mockOnoff(opts.accessible ?? true, opts.failWith);
  const driver = new OnoffDriver({ logger: silentLogger(), sysfsRoot: sysfs(chips, opts.withExport ?? true), chipBase: opts.chipBase, load: async () => mod });
  return { driver, lines };
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

describe('onoff GPIO driver', () => {
  it.each([
    ['an older kernel (base 0)', OLD_KERNEL, 17],
    ['a Pi 4 on kernel 6.6+ (base 512)', PI4_KERNEL_66, 529],
    ['a Pi 5 (RP1, base 571)', PI5, 588],
  ])('finds the sysfs number of a BCM pin on %s', async (_what, chips, expected) => {
    const { driver, lines } = await driverFor(chips);
    await driver.init();
    driver.openOutput(17);
    expect(lines[0]?.n).toBe(expected);
  });

  it('takes gpio.chipBase over what the chips say', async () => {
    const { driver, lines } = await driverFor(PI4_KERNEL_66, { chipBase: 1000 });
    await driver.init();
    driver.openOutput(5);
    expect(lines[0]?.n).toBe(1005);
  });

  it('opens LEDs without reconfiguring their direction, and writes levels', async () => {
    const { driver, lines } = await driverFor(OLD_KERNEL);
    await driver.init();
    const led = driver.openOutput(27);
    led.write(true);
    led.write(false);
    expect(lines[0]).toMatchObject({ direction: 'out', edge: 'none', options: { reconfigureDirection: false }, writes: [1, 0] });
  });

  it('opens buttons active-low with the debounce, and reports a press on a rising logical edge', async () => {
    const { driver, lines } = await driverFor(OLD_KERNEL);
    await driver.init();
    let presses = 0;
    driver.openInput(17, { activeLow: true, debounceMs: 30 }, () => presses++);
    expect(lines[0]).toMatchObject({ direction: 'in', edge: 'rising', options: { activeLow: true, debounceTimeout: 30 } });
    lines[0]?.watchers[0]?.(null, 1);
    lines[0]?.watchers[0]?.(null, 0); // released again before the debounced read
    lines[0]?.watchers[0]?.(new Error('EIO'), 1);
    expect(presses).toBe(1);
  });

  it('releases every line on close: unwatch and unexport', async () => {
    const { driver, lines } = await driverFor(OLD_KERNEL);
    await driver.init();
    driver.openInput(17, { activeLow: true, debounceMs: 30 }, () => undefined);
    driver.openOutput(27);
    driver.openOutput(5).close();
    driver.close();
    expect(lines.map((l) => [l.n, l.unwatched, l.unexported])).toEqual([
      [17, true, true],
      [27, true, true],
      [5, true, true],
    ]);
  });

  it('says when this machine has no GPIO at all', async () => {
    const { driver } = await driverFor([], { accessible: false, withExport: false });
    const err = await failure(driver.init());
    expect(err.code).toBe('GPIO_UNAVAILABLE');
    expect(err.message).toMatch(/no sysfs GPIO on this machine .*use gpio.driver: sim/);
  });

  it('says when onoff cannot be loaded', async () => {
    const driver = new OnoffDriver({ logger: silentLogger(), sysfsRoot: sysfs(OLD_KERNEL), load: async () => Promise.reject(new Error('Cannot find module epoll')) });
    const err = await failure(driver.init());
    expect(err).toMatchObject({ code: 'GPIO_UNAVAILABLE' });
    expect(err.message).toContain('the onoff module cannot be loaded (Cannot find module epoll)');
  });

  it.each([
    ['EACCES', 'GPIO_PERMISSION', /permission denied: the service user must be in the gpio group/],
    ['EBUSY', 'GPIO_BUSY', /is busy: claimed by a device-tree overlay .* or by another process/],
    ['EINVAL', 'GPIO_INVALID', /refused as invalid: on kernel 6\.6\+ sysfs numbers start at the chip base .*used base 512 from gpiochip512 \(pinctrl-bcm2711\); set gpio\.chipBase/],
  ])('explains %s when a line cannot be claimed', async (code, expected, message) => {
    const { driver } = await driverFor(PI4_KERNEL_66, { failWith: { 529: code } });
    await driver.init();
    const err = await failure(() => driver.openOutput(17));
    expect(err.code).toBe(expected);
    expect(err.message).toMatch(/^BCM 17 \(sysfs 529\)/);
    expect(err.message).toMatch(message);
  });
});
