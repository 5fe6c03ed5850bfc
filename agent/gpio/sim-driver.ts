import type { Clock, Timer } from '../platform/clock.js';
import { GpioError, type GpioDriver, type GpioInput, type GpioOutput, type InputOptions } from './gpio-driver.js';

interface SimLine {
  direction: 'in' | 'out';
  /** The physical level: a pulled-up button reads 1 at rest and 0 while pressed. */
  value: 0 | 1;
  input?: InputOptions & { onPress: () => void; onChange?: ((pressed: boolean, atMs: number) => void) | undefined; debounce: Timer | null; pressed: boolean };
}

export type SimGpioState = Record<string, { direction: 'in' | 'out'; value: 0 | 1 }>;

/**
 * In-memory GPIO lines that behave like onoff's: a press is a rising edge of the logical value,
 * reported once the line has been steady for the debounce time.
 */
export class SimGpioDriver implements GpioDriver {
  readonly kind = 'sim' as const;
  private readonly lines = new Map<number, SimLine>();

  constructor(private readonly clock: Clock) {}

  async init(): Promise<void> {}

  openInput(bcm: number, options: InputOptions, onPress: () => void, onChange?: (pressed: boolean, atMs: number) => void): GpioInput {
    this.claim(bcm);
    this.lines.set(bcm, { direction: 'in', value: options.activeLow ? 1 : 0, input: { ...options, onPress, onChange, debounce: null, pressed: false } });
    return { close: () => this.release(bcm) };
  }

  openOutput(bcm: number): GpioOutput {
    this.claim(bcm);
    const line: SimLine = { direction: 'out', value: 0 };
    this.lines.set(bcm, line);
    return {
      write: (on) => {
        line.value = on ? 1 : 0;
      },
      close: () => this.release(bcm),
    };
  }

  close(): void {
    for (const bcm of [...this.lines.keys()]) this.release(bcm);
  }

  state(): SimGpioState {
    const out: SimGpioState = {};
    for (const [bcm, line] of [...this.lines].sort((a, b) => a[0] - b[0])) out[String(bcm)] = { direction: line.direction, value: line.value };
    return out;
  }

  isInput(bcm: number): boolean {
    return this.lines.get(bcm)?.direction === 'in';
  }

  /** Sets a button line's physical level, as a finger or a bouncing contact would. */
  setLevel(bcm: number, value: 0 | 1): void {
    const line = this.lines.get(bcm);
    if (!line?.input) throw new GpioError('GPIO_INVALID', `BCM ${bcm} is not a button line of this agent`);
    const input = line.input;
    const logical = (v: 0 | 1): 0 | 1 => (input.activeLow ? ((1 - v) as 0 | 1) : v);
    if (logical(line.value) === logical(value)) return;
    line.value = value;
    // Like the kernel's debounce: an edge counts once the line has stayed that way for debounceMs.
    input.debounce?.cancel();
    input.debounce = this.clock.setTimeout(() => {
      input.debounce = null;
      const pressed = logical(line.value) === 1;
      if (pressed === input.pressed) return;
      input.pressed = pressed;
      input.onChange?.(pressed, this.clock.monotonic());
      if (pressed) input.onPress();
    }, input.debounceMs);
  }

  /** A press held past the debounce time, then released. */
  async press(bcm: number, holdMs?: number): Promise<void> {
    const line = this.lines.get(bcm);
    if (!line?.input) throw new GpioError('GPIO_INVALID', `BCM ${bcm} is not a button line of this agent`);
    const { activeLow, debounceMs } = line.input;
    this.setLevel(bcm, activeLow ? 0 : 1);
    await this.clock.sleep(holdMs ?? debounceMs + 20);
    if (this.lines.get(bcm) === line) this.setLevel(bcm, activeLow ? 1 : 0);
  }

  private claim(bcm: number): void {
    if (this.lines.has(bcm)) throw new GpioError('GPIO_BUSY', `BCM ${bcm} is already in use`);
  }

  private release(bcm: number): void {
    this.lines.get(bcm)?.input?.debounce?.cancel();
    this.lines.delete(bcm);
  }
}
