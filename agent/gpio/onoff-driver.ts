import { accessSync, constants, existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../platform/logger.js';
import { errorCode, errorMessage } from '../platform/errors.js';
import { GpioError, type GpioDriver, type GpioInput, type GpioOutput, type InputOptions } from './gpio-driver.js';
import { findHeaderBase } from './sysfs-chip.js';

/** The part of onoff's Gpio the driver uses. */
export interface OnoffGpio {
  watch(callback: (err: Error | null | undefined, value: 0 | 1) => void): void;
  unwatchAll(): void;
  writeSync(value: 0 | 1): void;
  unexport(): void;
}

export interface OnoffModule {
  Gpio: {
    new (gpio: number, direction: 'in' | 'out', edge?: 'none' | 'rising' | 'falling' | 'both', options?: { activeLow?: boolean; debounceTimeout?: number; reconfigureDirection?: boolean }): OnoffGpio;
    readonly accessible: boolean;
  };
}

export interface OnoffDriverOptions {
  logger: Logger;
  /** Where sysfs GPIO lives; a fake tree in tests. */
  sysfsRoot?: string;
  /** sysfs number of BCM 0, when the chip labels do not tell. */
  chipBase?: number | undefined;
  /** Loads onoff; tests pass a mock. */
  load?: () => Promise<OnoffModule>;
}

/**
 * onoff is an optional dependency (its epoll addon needs a compiler, and most boxes use gpiod):
 * imported by a name the type checker does not resolve, typed here at our boundary, so the build
 * never depends on it being installed.
 */
const ONOFF = 'onoff';

async function loadOnoff(): Promise<OnoffModule> {
  const mod = (await import(ONOFF)) as OnoffModule & { default?: OnoffModule };
  return mod.default ?? mod;
}

/** Real sysfs GPIO through onoff. Config speaks BCM numbers; the driver adds the chip's base. */
export class OnoffDriver implements GpioDriver {
  readonly kind = 'onoff' as const;
  private onoff: OnoffModule | null = null;
  private base = 0;
  private chip = 'chipBase from config';
  private readonly open = new Set<OnoffGpio>();

  constructor(private readonly opts: OnoffDriverOptions) {}

  get sysfsRoot(): string {
    return this.opts.sysfsRoot ?? '/sys/class/gpio';
  }

  async init(): Promise<void> {
    if (this.onoff) return;
    let onoff: OnoffModule;
    try {
      onoff = await (this.opts.load ?? loadOnoff)();
    } catch (err) {
      throw new GpioError('GPIO_UNAVAILABLE', `the onoff module cannot be loaded (${errorMessage(err)}); it builds only on Linux: npm ci on the Pi, or use gpio.driver: sim`, err);
    }
    const root = this.sysfsRoot;
    if (!onoff.Gpio.accessible) {
      if (!existsSync(join(root, 'export'))) {
        throw new GpioError('GPIO_UNAVAILABLE', `no sysfs GPIO on this machine (${root}/export is missing): not a Raspberry Pi, or a kernel without CONFIG_GPIO_SYSFS; use gpio.driver: sim to run without hardware`);
      }
      try {
        accessSync(join(root, 'export'), constants.W_OK);
      } catch {
        throw new GpioError('GPIO_PERMISSION', `cannot write ${root}/export (EACCES): the service user is not in the gpio group (sudo usermod -aG gpio chair-agent, then restart)`);
      }
      throw new GpioError('GPIO_UNAVAILABLE', `sysfs GPIO at ${root} is not accessible`);
    }
    if (this.opts.chipBase !== undefined) {
      this.base = this.opts.chipBase;
    } else {
      const found = findHeaderBase(root);
      if (!found) throw new GpioError('GPIO_UNAVAILABLE', `no gpiochip under ${root}: cannot tell the sysfs number of BCM 0; set gpio.chipBase`);
      this.base = found.base;
      this.chip = `${found.chip.name} (${found.chip.label})`;
    }
    this.onoff = onoff;
    this.opts.logger.info({ base: this.base, chip: this.chip }, 'sysfs GPIO ready');
  }

  openInput(bcm: number, options: InputOptions, onPress: () => void, onChange?: (pressed: boolean, atMs: number) => void): GpioInput {
    // sysfs cannot set a pull resistor (gpio.bias): that is config.txt's job (README, Wiring).
    const line = this.claim(bcm, 'in', onChange ? 'both' : 'rising', { activeLow: options.activeLow, debounceTimeout: options.debounceMs });
    // active_low makes a press read as 1, so a press is a rising edge; onoff reads the value
    // again once the line has been steady for the debounce time.
    line.watch((err, value) => {
      if (err) {
        this.opts.logger.warn({ bcm, err: errorMessage(err) }, 'button line read failed');
        return;
      }
      onChange?.(value === 1, performance.now());
      if (value === 1) onPress();
    });
    return { close: () => this.release(line) };
  }

  openOutput(bcm: number): GpioOutput {
    // reconfigureDirection: false leaves a line that is already an output as it is, so an LED
    // does not blink off while the service restarts.
    const line = this.claim(bcm, 'out', 'none', { reconfigureDirection: false });
    let failed = false;
    return {
      write: (on) => {
        try {
          line.writeSync(on ? 1 : 0);
          failed = false;
        } catch (err) {
          if (!failed) this.opts.logger.warn({ bcm, err: errorMessage(err) }, 'LED line write failed');
          failed = true;
        }
      },
      close: () => this.release(line),
    };
  }

  close(): void {
    for (const line of [...this.open]) this.release(line);
  }

  private claim(bcm: number, direction: 'in' | 'out', edge: 'none' | 'rising' | 'both', options: object): OnoffGpio {
    if (!this.onoff) throw new GpioError('GPIO_UNAVAILABLE', 'GPIO is not initialised');
    const n = this.base + bcm;
    try {
      const line = new this.onoff.Gpio(n, direction, edge, options);
      this.open.add(line);
      return line;
    } catch (err) {
      throw this.explain(err, bcm, n);
    }
  }

  private release(line: OnoffGpio): void {
    if (!this.open.delete(line)) return;
    try {
      line.unwatchAll();
      line.unexport();
    } catch (err) {
      this.opts.logger.warn({ err: errorMessage(err) }, 'GPIO line release failed');
    }
  }

  private explain(err: unknown, bcm: number, n: number): GpioError {
    const what = `BCM ${bcm} (sysfs ${n})`;
    switch (errorCode(err)) {
      case 'EACCES':
      case 'EPERM':
        return new GpioError('GPIO_PERMISSION', `${what}: permission denied: the service user must be in the gpio group (sudo usermod -aG gpio chair-agent)`, err);
      case 'EBUSY':
        return new GpioError('GPIO_BUSY', `${what} is busy: claimed by a device-tree overlay in /boot/firmware/config.txt or by another process (see gpioinfo); pick another pin`, err);
      case 'EINVAL':
        return new GpioError(
          'GPIO_INVALID',
          `${what} was refused as invalid: on kernel 6.6+ sysfs numbers start at the chip base (512 on a Pi 4, 571 on a Pi 5); used base ${this.base} from ${this.chip}; set gpio.chipBase if that is wrong`,
          err,
        );
      case 'ENOENT':
        return new GpioError('GPIO_UNAVAILABLE', `${what}: the line did not appear in ${this.sysfsRoot} after export`, err);
      default:
        return new GpioError('GPIO_FAILED', `${what}: ${errorMessage(err)}`, err);
    }
  }
}
