import { describe, expect, it } from 'vitest';
import { within } from '../../agent/platform/clock.js';
import { FakeClock } from '../helpers/fake-clock.js';

describe('within: a bounded wait', () => {
  it('says true when the work settles in time, and leaves no timer behind', async () => {
    const clock = new FakeClock();
    expect(await within(clock, Promise.resolve(1), 1000)).toBe(true);
    expect(await within(clock, Promise.reject(new Error('failed, but in time')), 1000)).toBe(true);
    expect(clock.timerCount).toBe(0);
  });

  it('says false when the time runs out first', async () => {
    const clock = new FakeClock();
    const waiting = within(clock, new Promise(() => undefined), 1000);
    await clock.advance(999);
    let done = false;
    void waiting.then(() => (done = true));
    await clock.advance(0);
    expect(done).toBe(false);
    await clock.advance(1);
    expect(await waiting).toBe(false);
  });
});
