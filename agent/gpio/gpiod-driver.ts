import type { Logger } from '../platform/logger.js';
import { errorCode, errorMessage } from '../platform/errors.js';
import { chipPaths, loadGpiodBinding, addonPath, type Bias, type ChipInfo, type GpiodBinding, type LineInfo } from './gpiod-binding.js';
import { GpioError, type GpioDriver, type GpioInput, type GpioOutput, type InputOptions, type LineDetails } from './gpio-driver.js';

/** The consumer label the agent's lines carry (gpioinfo shows it). */
export const CONSUMER = 'chair-agent';

/** Labels of the controllers whose lines 0-27 are the 40-pin header's BCM numbers (RP1 on a Pi 5 and CM5). */
export const HEADER_CHIP_LABELS = ['pinctrl-rp1', 'pinctrl-bcm2711', 'pinctrl-bcm2835', 'pinctrl-bcm2712'];

interface Chip extends ChipInfo {
  path: string;
  /** The kernel's name of each line, by offset. */
  names: string[];
}

export interface LineRef {
  chip: Chip;
  offset: number;
  name: string;
  found: 'name' | 'header-offset';
}

export interface GpiodDriverOptions {
  logger: Logger;
  /** Where gpiochip devices are; /dev. */
  devDir?: string;
  /** The addon, or how to load it; tests pass a fake that behaves like the kernel. */
  binding?: GpiodBinding | (() => GpiodBinding);
  /** Bias for buttons when openInput names none. */
  bias: Bias;
}

function explainOpen(err: unknown, path: string): GpioError {
  const code = errorCode(err);
  if (code === 'EACCES' || code === 'EPERM') {
    return new GpioError(
      'GPIO_PERMISSION',
      `cannot open ${path} (permission denied): the service user must be in group gpio (sudo usermod -aG gpio chair-agent), and the unit needs DeviceAllow=char-gpiochip rw`,
      err,
    );
  }
  return new GpioError('GPIO_FAILED', `cannot use ${path}: ${errorMessage(err)}`, err);
}

/**
 * Buttons and LEDs on the kernel's GPIO character device (uAPI v2, what libgpiod v2 uses), through
 * the agent's own Node-API addon (docs/ARCHITECTURE.md says why). Lines are found by their name,
 * GPIO<bcm>, on whichever /dev/gpiochip* has it (a Pi 5's RP1 is gpiochip0 or gpiochip4 depending on
 * the kernel); a Pi 3 names some header lines after their function (SPI_MISO...), so failing the
 * name, the header chip's line with that offset is used. Buttons get a pull resistor and debounce
 * from the kernel, edge events with kernel timestamps; every line carries the consumer label
 * "chair-agent", and the kernel releases them all if the process dies.
 */
export class GpiodDriver implements GpioDriver {
  readonly kind = 'gpiod' as const;
  private binding: GpiodBinding | null = null;
  private chips: Chip[] = [];
  private readonly lines = new Map<number, { fd: number; watcher: unknown; bcm: number }>();

  constructor(private readonly opts: GpiodDriverOptions) {}

  get devDir(): string {
    return this.opts.devDir ?? '/dev';
  }

  async init(): Promise<void> {
    if (this.binding) return;
    let binding: GpiodBinding;
    try {
      const given = this.opts.binding ?? loadGpiodBinding;
      binding = typeof given === 'function' ? given() : given;
    } catch (err) {
      throw new GpioError(
        'GPIO_UNAVAILABLE',
        `the gpiod addon cannot be loaded (${addonPath() ?? 'native/prebuilds'}: ${errorMessage(err).split('\n')[0]}): reinstall the package, or run npm ci on a machine with a C compiler; gpio.driver: sim runs without hardware`,
        err,
      );
    }
    const paths = chipPaths(this.devDir);
    if (paths.length === 0) {
      throw new GpioError(
        'GPIO_UNAVAILABLE',
        `no GPIO character device (${this.devDir}/gpiochip*): not a Raspberry Pi, or a kernel without it (or the unit hides /dev); gpio.driver: sim runs without hardware`,
      );
    }
    const chips: Chip[] = [];
    let refusal: GpioError | null = null;
    for (const path of paths) {
      try {
        const info = binding.chipInfo(path);
        const names: string[] = [];
        for (let offset = 0; offset < info.lines; offset++) names.push(binding.lineInfo(path, offset).name);
        chips.push({ ...info, path, names });
      } catch (err) {
        refusal ??= explainOpen(err, path);
      }
    }
    if (chips.length === 0 && refusal) throw refusal;
    this.binding = binding;
    this.chips = chips;
    this.opts.logger.info({ chips: chips.map((c) => `${c.name} [${c.label}] (${c.lines} lines)`) }, 'GPIO character device ready');
  }

  /** The chips, as found at init (the wiring test, doctor). */
  listChips(): readonly Chip[] {
    return this.chips;
  }

  private headerChip(): Chip | undefined {
    for (const label of HEADER_CHIP_LABELS) {
      const chip = this.chips.find((c) => c.label === label);
      if (chip) return chip;
    }
    return undefined;
  }

  /** The line for a BCM number: by its name GPIO<bcm>, else that offset of the header chip. */
  resolve(bcm: number): LineRef | null {
    const name = `GPIO${bcm}`;
    const header = this.headerChip();
    const byName = this.chips.filter((c) => c.names.includes(name));
    const chip = byName.find((c) => c === header) ?? byName[0];
    if (chip) return { chip, offset: chip.names.indexOf(name), name, found: 'name' };
    if (header && bcm < header.lines) return { chip: header, offset: bcm, name: header.names[bcm] ?? '', found: 'header-offset' };
    return null;
  }

  private line(bcm: number): LineRef {
    if (!this.binding) throw new GpioError('GPIO_UNAVAILABLE', 'GPIO is not initialised');
    const ref = this.resolve(bcm);
    if (!ref) {
      throw new GpioError(
        'GPIO_INVALID',
        `no line named GPIO${bcm} on ${this.chips.map((c) => c.name).join(', ')}, and no Raspberry Pi header chip (${HEADER_CHIP_LABELS.join(', ')}): is this a Raspberry Pi?`,
      );
    }
    return ref;
  }

  private where(ref: LineRef, bcm: number): string {
    return `BCM ${bcm} (${ref.chip.name} line ${ref.offset}${ref.name && ref.name !== `GPIO${bcm}` ? `, named ${ref.name}` : ''})`;
  }

  private request(bcm: number, ref: LineRef, config: Parameters<GpiodBinding['request']>[2]): number {
    const binding = this.binding as GpiodBinding;
    try {
      return binding.request(ref.chip.path, ref.offset, config);
    } catch (err) {
      const code = errorCode(err);
      const what = this.where(ref, bcm);
      if (code === 'EBUSY') throw this.busyError(bcm, ref);
      if (code === 'EACCES' || code === 'EPERM') throw explainOpen(err, ref.chip.path);
      if (code === 'EINVAL') {
        throw new GpioError('GPIO_INVALID', `${what}: the kernel refused the line settings (${JSON.stringify(config)}); a kernel older than 5.10 has no bias or debounce here`, err);
      }
      throw new GpioError('GPIO_FAILED', `${what}: ${errorMessage(err)}`, err);
    }
  }

  openInput(bcm: number, options: InputOptions, onPress: () => void, onChange?: (pressed: boolean, atMs: number) => void): GpioInput {
    const ref = this.line(bcm);
    const bias = options.bias ?? this.opts.bias;
    const fd = this.request(bcm, ref, {
      consumer: CONSUMER,
      direction: 'input',
      // The kernel then reports a press as a rising edge, whichever way the button is wired.
      activeLow: options.activeLow,
      bias,
      edge: 'both',
      debounceUs: Math.round(options.debounceMs * 1000),
    });
    const binding = this.binding as GpiodBinding;
    let watcher: unknown;
    let lastSeqno: number | null = null;
    try {
      watcher = binding.watch(fd, (events, error) => {
        for (const e of events) {
          // The kernel numbers each line's events: a gap is events its buffer dropped (a burst
          // faster than the agent read them). A press among them is lost; say so.
          if (lastSeqno !== null && e.seqno > lastSeqno + 1) {
            this.opts.logger.warn({ bcm, lost: e.seqno - lastSeqno - 1 }, "button events lost: the kernel's event buffer overflowed");
          }
          lastSeqno = e.seqno;
          try {
            onChange?.(e.rising, e.timestampMs);
            if (e.rising) onPress();
          } catch (err) {
            this.opts.logger.error({ bcm, err: errorMessage(err) }, 'button handler failed');
          }
        }
        if (error) this.lineFailed(fd, ref, bcm, error, options);
      });
    } catch (err) {
      binding.release(fd);
      throw new GpioError('GPIO_FAILED', `${this.where(ref, bcm)}: cannot watch it: ${errorMessage(err)}`, err);
    }
    this.lines.set(fd, { fd, watcher, bcm });
    return { close: () => this.release(fd) };
  }

  /** A watched line failed (its chip is gone): released, logged, and reported to its owner. */
  private lineFailed(fd: number, ref: LineRef, bcm: number, error: Error & { code?: string }, options: InputOptions): void {
    const failure = new GpioError(
      'GPIO_FAILED',
      `${this.where(ref, bcm)} stopped working (${error.code ?? 'error'}: ${error.message}); the button is dead until the agent restarts: is the GPIO chip still there (gpioinfo)?`,
      error,
    );
    this.opts.logger.error({ bcm, err: failure.message }, 'GPIO line failed');
    this.release(fd);
    try {
      options.onFailure?.(failure);
    } catch (err) {
      this.opts.logger.error({ bcm, err: errorMessage(err) }, 'GPIO failure handler failed');
    }
  }

  openOutput(bcm: number): GpioOutput {
    const ref = this.line(bcm);
    const fd = this.request(bcm, ref, { consumer: CONSUMER, direction: 'output', value: 0 });
    this.lines.set(fd, { fd, watcher: null, bcm });
    const binding = this.binding as GpiodBinding;
    let failed = false;
    return {
      write: (on) => {
        try {
          binding.setValue(fd, on ? 1 : 0);
          failed = false;
        } catch (err) {
          if (!failed) this.opts.logger.warn({ bcm, err: errorMessage(err) }, 'LED line write failed');
          failed = true;
        }
      },
      close: () => this.release(fd),
    };
  }

  /** EBUSY: someone holds the line; the kernel says who. */
  private busyError(bcm: number, ref: LineRef): GpioError {
    let holder = '';
    try {
      holder = (this.binding as GpiodBinding).lineInfo(ref.chip.path, ref.offset).consumer;
    } catch {
      // courtesy only
    }
    const what = this.where(ref, bcm);
    return new GpioError(
      'GPIO_BUSY',
      `${what} is used by ${holder ? `"${holder}"` : 'another program or driver'}${holder === CONSUMER ? ' (the chair-agent service holds it: sudo systemctl stop chair-agent)' : ': an overlay in /boot/firmware/config.txt, or a program; pick another pin'}`,
    );
  }

  inspect(bcm: number): LineDetails | null {
    const ref = this.binding ? this.resolve(bcm) : null;
    if (!ref || !this.binding) return null;
    let info: LineInfo | null = null;
    try {
      info = this.binding.lineInfo(ref.chip.path, ref.offset);
    } catch {
      // shown without
    }
    const own = [...this.lines.values()].find((l) => l.bcm === bcm);
    let level: 0 | 1 | null = null;
    if (own) {
      try {
        level = this.binding.getValue(own.fd);
      } catch {
        level = null;
      }
    }
    return {
      bcm,
      chip: ref.chip.name,
      chipLabel: ref.chip.label,
      offset: ref.offset,
      name: ref.name,
      found: ref.found,
      bias: info?.bias ?? '?',
      consumer: info?.used ? info.consumer || '(unnamed)' : '',
      level,
    };
  }

  close(): void {
    for (const fd of [...this.lines.keys()]) this.release(fd);
  }

  private release(fd: number): void {
    const line = this.lines.get(fd);
    if (!line || !this.binding) return;
    this.lines.delete(fd);
    try {
      if (line.watcher) this.binding.unwatch(line.watcher);
      this.binding.release(fd);
    } catch (err) {
      this.opts.logger.warn({ bcm: line.bcm, err: errorMessage(err) }, 'GPIO line release failed');
    }
  }
}
