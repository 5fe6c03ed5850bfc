import { describe, expect, it } from 'vitest';
import { LedController } from '../../agent/gpio/leds.js';
import { SimGpioDriver } from '../../agent/gpio/sim-driver.js';
import { silentLogger } from '../../agent/platform/logger.js';
import { FakeClock } from '../helpers/fake-clock.js';

function setup() {
  const clock = new FakeClock();
  const driver = new SimGpioDriver(clock);
  const leds = new LedController({ driver, clock, logger: silentLogger(), specs: [{ name: 'a', pin: 27 }, { name: 'b', pin: 22 }], ready: () => true });
  const writes: string[] = [];
  leds.start();
  const level = (pin: number): number => driver.state()[String(pin)]?.value ?? -1;
  const sample = async (ms: number, every: number): Promise<number[]> => {
    const out: number[] = [];
    for (let t = 0; t < ms; t += every) {
      out.push(level(27));
      await clock.advance(every);
    }
    return out;
  };
  return { clock, driver, leds, writes, level, sample };
}

describe('LED engine', () => {
  it('drives a line steady, fast and slow on the clock', async () => {
    const { leds, level, sample } = setup();
    leds.set('a', 'on');
    expect(level(27)).toBe(1);
    leds.set('a', 'fast');
    expect(await sample(400, 50)).toEqual([1, 1, 0, 0, 1, 1, 0, 0]);
    leds.set('a', 'slow');
    expect(await sample(2000, 250)).toEqual([1, 1, 0, 0, 1, 1, 0, 0]);
  });

  it('lays failure flashes over the pattern and goes back to it', async () => {
    const { leds, level, clock } = setup();
    leds.set('a', 'on');
    leds.flash('a');
    expect(leds.shown('a')).toBe('flash');
    const seen: number[] = [];
    for (let i = 0; i < 8; i++) {
      seen.push(level(27));
      await clock.advance(75);
    }
    expect(seen).toEqual([1, 0, 1, 0, 1, 0, 1, 0]);
    expect(leds.shown('a')).toBe('on');
    expect(level(27)).toBe(1);
  });

  it('ends a failure flash and keeps a blink on time when NTP steps the wall clock back an hour', async () => {
    const { leds, level, clock, sample } = setup();
    leds.set('a', 'on');
    leds.flash('a');
    clock.jump(-3_600_000);
    await clock.advance(600);
    expect(leds.shown('a')).toBe('on');
    expect(level(27)).toBe(1);
    leds.set('a', 'fast');
    clock.jump(-3_600_000);
    expect(await sample(400, 50)).toEqual([1, 1, 0, 0, 1, 1, 0, 0]);
  });

  it('runs no timer while every LED is steady', async () => {
    const { leds, clock } = setup();
    leds.set('a', 'fast');
    expect(clock.timerCount).toBe(1);
    leds.set('a', 'on');
    leds.set('b', 'off');
    expect(clock.timerCount).toBe(0);
  });

  it('turns every LED off and releases the lines on stop', () => {
    const { leds, driver } = setup();
    leds.set('a', 'on');
    leds.set('b', 'slow');
    leds.stop();
    expect(driver.state()).toEqual({});
  });
});
