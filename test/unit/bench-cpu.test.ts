import { describe, expect, it } from 'vitest';
import { cpuMsBetween, type CpuSnapshot } from '../../bench/lib/proc.js';

const snap = (threads: [string, number][], ticksSeconds: number, complete = true): CpuSnapshot => ({ threads: new Map(threads), complete, ticksSeconds });

describe('the bench CPU figure between two snapshots', () => {
  it('sums each thread in nanoseconds, a thread born meanwhile whole', () => {
    const before = snap([['1', 100e6], ['2', 50e6]], 1.5);
    const after = snap([['1', 180.5e6], ['2', 60e6], ['3', 7e6]], 1.6);
    expect(cpuMsBetween(before, after)).toBeCloseTo(80.5 + 10 + 7, 6);
  });

  it('falls back to the ticks when a thread ended, since its time left with it', () => {
    const before = snap([['1', 100e6], ['2', 50e6]], 1.5);
    const after = snap([['1', 180e6]], 1.62);
    expect(cpuMsBetween(before, after)).toBeCloseTo(120, 6);
  });

  it('falls back to the ticks when a thread could not be read (no schedstat)', () => {
    const before = snap([], 2, false);
    const after = snap([], 2.25, false);
    expect(cpuMsBetween(before, after)).toBeCloseTo(250, 6);
  });
});
