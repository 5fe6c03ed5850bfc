import type { Component } from '../platform/component.js';
import type { Logger } from '../platform/logger.js';
import { errorMessage } from '../platform/errors.js';
import type { Health } from '../observe/health.js';
import type { GpioDriver } from './gpio-driver.js';

/**
 * The GPIO driver as a running part of the agent. Lines are optional equipment: if the driver
 * cannot be had, the agent runs on without buttons and LEDs and says why (health, the log).
 */
export class GpioLines implements Component {
  readonly name = 'gpio';
  private isReady = false;

  constructor(
    private readonly deps: {
      driver: GpioDriver;
      health: Health;
      logger: Logger;
      /** Lines the config asks for: with none, the driver is not even opened. */
      lineCount: number;
    },
  ) {}

  /** The driver is open: buttons and LEDs may request their lines. */
  get ready(): boolean {
    return this.isReady;
  }

  async start(): Promise<void> {
    if (this.deps.lineCount === 0) return;
    try {
      await this.deps.driver.init();
      this.isReady = true;
    } catch (err) {
      this.deps.health.set('gpio', false, errorMessage(err));
      this.deps.logger.error({ err: errorMessage(err) }, 'GPIO unavailable; buttons and LEDs will not work, everything else does');
    }
  }

  stop(): Promise<void> | void {
    this.isReady = false;
    return this.deps.driver.close();
  }
}

interface LineUsers {
  /** Lines that could not be requested or stopped working, each with why. */
  failed(): string[];
}

/**
 * Health's "gpio" check, once buttons and LEDs have requested their lines (it starts after them),
 * and again whenever a line stops working later.
 */
export class GpioHealthCheck implements Component {
  readonly name = 'gpio-check';

  constructor(
    private readonly deps: {
      lines: GpioLines;
      driver: GpioDriver;
      buttons: LineUsers;
      leds: LineUsers;
      health: Health;
      counts: { buttons: number; leds: number };
    },
  ) {}

  start(): void {
    if (!this.deps.lines.ready) return;
    const failed = this.failed();
    if (failed.length > 0) this.report(failed);
    else this.deps.health.set('gpio', true, `${this.deps.counts.buttons} button(s), ${this.deps.counts.leds} LED(s) on ${this.deps.driver.kind}`);
  }

  stop(): void {}

  /** A line stopped working after it was opened (the kernel took it away, the chip went). */
  lineFailed(): void {
    this.report(this.failed());
  }

  private failed(): string[] {
    return [...this.deps.buttons.failed(), ...this.deps.leds.failed()];
  }

  private report(failed: string[]): void {
    this.deps.health.set('gpio', false, `${failed.length} line(s) cannot be used: ${failed.join('; ')}`);
  }
}
