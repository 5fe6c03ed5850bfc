import { AgentError } from '../platform/errors.js';
import type { Bias } from './gpiod-binding.js';

export interface InputOptions {
  /** The button pulls the line to ground when pressed. */
  activeLow: boolean;
  /** A press counts once the line has been steady this long. */
  debounceMs: number;
  /** Pull resistor on the line (gpiod; sysfs cannot set one). */
  bias?: Bias;
  /**
   * The line stopped working after it was opened (its chip went away): the driver has released
   * it, and no press will come from it any more.
   */
  onFailure?: (error: GpioError) => void;
}

export interface GpioInput {
  close(): void;
}

export interface GpioOutput {
  write(on: boolean): void;
  close(): void;
}

/** A configured line as the driver found it (the wiring test, doctor). */
export interface LineDetails {
  bcm: number;
  /** gpiochip0, or "sysfs", or "sim". */
  chip: string;
  chipLabel: string;
  offset: number;
  /** The kernel's name of the line (GPIO17, SPI_MISO...), or "" when it has none. */
  name: string;
  /** How it was found: by its name GPIO<bcm>, or as that offset of the header chip. */
  found: 'name' | 'header-offset' | 'sysfs' | 'sim';
  bias: string;
  /** Who holds it, when someone does. */
  consumer: string;
  level: 0 | 1 | null;
}

/**
 * The port to the Pi's GPIO lines, in BCM numbers. Three drivers: gpiod (the kernel's GPIO
 * character device), onoff (legacy sysfs) and sim (in memory, with HTTP routes for tests, the
 * demo and installers without hardware).
 */
export interface GpioDriver {
  readonly kind: 'gpiod' | 'onoff' | 'sim';
  /** Prepares the driver; throws a GpioError that explains what is wrong with this machine. */
  init(): Promise<void>;
  /**
   * A button: `onPress` at each debounced press; `onChange` (optional) at every debounced edge,
   * with its time in milliseconds on a monotonic clock (the wiring test shows hold times).
   */
  openInput(bcm: number, options: InputOptions, onPress: () => void, onChange?: (pressed: boolean, atMs: number) => void): GpioInput;
  openOutput(bcm: number): GpioOutput;
  /** What the driver knows of a line (without claiming it). */
  inspect?(bcm: number): LineDetails | null;
  /** Releases every line still open. */
  close(): void;
}

export type GpioErrorCode = 'GPIO_UNAVAILABLE' | 'GPIO_PERMISSION' | 'GPIO_BUSY' | 'GPIO_INVALID' | 'GPIO_FAILED';

export class GpioError extends AgentError {
  declare readonly code: GpioErrorCode;
  constructor(code: GpioErrorCode, message: string, cause?: unknown) {
    super(code, message, cause === undefined ? undefined : { cause });
    this.name = 'GpioError';
  }
}
