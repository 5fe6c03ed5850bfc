import { describe, expect, it } from 'vitest';
import { chairLedPattern, ledLevel, nextLedChange, statusLedPattern } from '../../agent/core/led-patterns.js';

describe('LED patterns', () => {
  it('blinks fast at 5 Hz and slow at 1 Hz', () => {
    expect([0, 99, 100, 199, 200].map((t) => ledLevel('fast', t))).toEqual([true, true, false, false, true]);
    expect([0, 499, 500, 999, 1000].map((t) => ledLevel('slow', t))).toEqual([true, true, false, false, true]);
    expect(nextLedChange('fast', 30)).toBe(70);
    expect(nextLedChange('slow', 30)).toBe(470);
  });

  it('flashes a few times, then stops', () => {
    const levels = Array.from({ length: 10 }, (_, i) => ledLevel('flash', i * 75));
    expect(levels).toEqual([true, false, true, false, true, false, true, false, false, false]);
    expect(nextLedChange('flash', 600)).toBeNull();
  });

  it('needs no timer for steady patterns', () => {
    expect(nextLedChange('on', 5)).toBeNull();
    expect(nextLedChange('off', 5)).toBeNull();
  });

  it('shows each chair state as the interface lists it', () => {
    const chair = { online: true, running: false, startable: true, starting: false };
    expect(chairLedPattern(chair)).toBe('on');
    expect(chairLedPattern({ ...chair, starting: true })).toBe('fast');
    expect(chairLedPattern({ ...chair, running: true, startable: false })).toBe('slow');
    expect(chairLedPattern({ ...chair, online: false })).toBe('off');
    expect(chairLedPattern({ ...chair, startable: false })).toBe('off');
    expect(chairLedPattern(null)).toBe('off');
  });

  it('shows the agent health on the status LED', () => {
    expect(statusLedPattern(true, true)).toBe('on');
    expect(statusLedPattern(true, false)).toBe('slow');
    expect(statusLedPattern(false, true)).toBe('fast');
    expect(statusLedPattern(false, false)).toBe('fast');
  });
});
