import { AgentError } from '../errors.js';

export interface InputOptions {
  /** The button pulls the line to ground when pressed (pull-up on the pin). */
  activeLow: boolean;
  /** A press counts once the line has been steady this long. */
  debounceMs: number;
}

export interface GpioInput {
  close(): void;
}

export interface GpioOutput {
  write(on: boolean): void;
  close(): void;
}

/**
 * The port to the Pi's GPIO lines, in BCM numbers. Two drivers: onoff (sysfs, the real pins)
 * and sim (in memory, with HTTP routes for tests, the demo and installers without hardware).
 */
export interface GpioDriver {
  readonly kind: 'onoff' | 'sim';
  /** Prepares the driver; throws a GpioError that explains what is wrong with this machine. */
  init(): Promise<void>;
  openInput(bcm: number, options: InputOptions, onPress: () => void): GpioInput;
  openOutput(bcm: number): GpioOutput;
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
