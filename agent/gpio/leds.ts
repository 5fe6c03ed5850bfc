import type { Clock, Timer } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import { errorMessage } from '../platform/errors.js';
import { FLASH_TOTAL_MS, ledLevel, nextLedChange, type LedPattern } from '../core/led-patterns.js';
import type { GpioDriver, GpioOutput } from './gpio-driver.js';
import type { Component } from '../platform/component.js';

interface Led {
  name: string;
  output: GpioOutput | null;
  /** Why the line could not be opened. */
  failure: string | null;
  pattern: LedPattern;
  since: number;
  /** Failure flashes laid over the pattern until this time. */
  flashUntil: number;
  flashSince: number;
  level: boolean | null;
}

export interface LedSpec {
  name: string;
  pin: number;
}

/**
 * One engine for every LED: each has a pattern (and maybe failure flashes over it); the engine
 * writes a line only when its level changes, and sleeps until the next change anywhere. With
 * every LED steady no timer runs at all.
 */
export class LedController implements Component {
  readonly name = 'leds';
  private readonly leds = new Map<string, Led>();
  private timer: Timer | null = null;
  private running = false;

  constructor(
    private readonly deps: { driver: GpioDriver; clock: Clock; logger: Logger; specs: readonly LedSpec[]; ready: () => boolean },
  ) {}

  start(): void {
    this.running = true;
    const now = this.deps.clock.monotonic();
    for (const spec of this.deps.specs) {
      let output: GpioOutput | null = null;
      let failure: string | null = null;
      if (this.deps.ready()) {
        try {
          output = this.deps.driver.openOutput(spec.pin);
        } catch (err) {
          failure = errorMessage(err);
          this.deps.logger.error({ led: spec.name, pin: spec.pin, err: failure }, 'cannot open LED line');
        }
      }
      this.leds.set(spec.name, { name: spec.name, output, failure, pattern: 'off', since: now, flashUntil: 0, flashSince: 0, level: null });
    }
    this.render();
  }

  stop(): void {
    this.running = false;
    this.timer?.cancel();
    this.timer = null;
    for (const led of this.leds.values()) {
      led.output?.write(false); // off = the agent is not running
      led.output?.close();
    }
    this.leds.clear();
  }

  /** Why each LED line that could not be opened failed, for health. */
  failed(): string[] {
    return [...this.leds.values()].filter((l) => l.failure !== null).map((l) => `LED ${l.name}: ${l.failure as string}`);
  }

  set(name: string, pattern: LedPattern): void {
    const led = this.leds.get(name);
    if (!led || led.pattern === pattern) return;
    led.pattern = pattern;
    led.since = this.deps.clock.monotonic();
    this.render();
  }

  /** A few quick flashes, then back to whatever the pattern is by then. */
  flash(name: string): void {
    const led = this.leds.get(name);
    if (!led) return;
    const now = this.deps.clock.monotonic();
    led.flashSince = now;
    led.flashUntil = now + FLASH_TOTAL_MS;
    this.render();
  }

  /** The LEDs that could be opened, in config order. */
  names(): string[] {
    return [...this.leds.values()].filter((l) => l.output !== null).map((l) => l.name);
  }

  /** What an LED shows now: its pattern, or 'flash' while failure flashes run. */
  shown(name: string): LedPattern | null {
    const led = this.leds.get(name);
    if (!led) return null;
    return this.deps.clock.monotonic() < led.flashUntil ? 'flash' : led.pattern;
  }

  private render(): void {
    if (!this.running) return;
    this.timer?.cancel();
    this.timer = null;
    const now = this.deps.clock.monotonic();
    let wake: number | null = null;
    for (const led of this.leds.values()) {
      const flashing = now < led.flashUntil;
      const pattern: LedPattern = flashing ? 'flash' : led.pattern;
      const elapsed = now - (flashing ? led.flashSince : led.since);
      const level = ledLevel(pattern, elapsed);
      if (level !== led.level) {
        led.level = level;
        led.output?.write(level);
      }
      const next = flashing ? Math.min(nextLedChange('flash', elapsed) ?? Infinity, led.flashUntil - now) : nextLedChange(pattern, elapsed);
      if (next !== null && Number.isFinite(next)) wake = wake === null ? next : Math.min(wake, next);
    }
    if (wake !== null) this.timer = this.deps.clock.setTimeout(() => this.render(), Math.max(1, wake));
  }
}
