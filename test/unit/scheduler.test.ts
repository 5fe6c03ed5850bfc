import { describe, expect, it } from 'vitest';
import { monotonicScheduler } from '../../agent/time/scheduler.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { memoryLogger } from '../helpers/memory-logger.js';

function setup(expression = '*/30 * * * * *') {
  const clock = new FakeClock(Date.UTC(2026, 10, 22, 5, 0, 10));
  const { logger, lines } = memoryLogger('debug');
  const runs: number[] = [];
  let hold: Promise<void> | null = null;
  const job = monotonicScheduler('Asia/Bangkok', clock, logger).schedule(expression, 'test', async () => {
    runs.push(clock.now());
    await hold;
  });
  return { clock, lines, runs, job, setHold: (p: Promise<void> | null): void => {
    hold = p;
  } };
}

describe('the scheduler on a clock that jumps', () => {
  it('runs at each match of the expression in the site zone', async () => {
    const { clock, runs, job } = setup();
    await clock.advance(95_000);
    expect(runs.map((t) => new Date(t).toISOString())).toEqual(['2026-11-22T05:00:30.000Z', '2026-11-22T05:01:00.000Z', '2026-11-22T05:01:30.000Z']);
    job.stop();
  });

  it('a forward jump of 90 minutes runs the job once, not once per missed match, and logs no warnings', async () => {
    const { clock, runs, lines, job } = setup();
    await clock.advance(25_000);
    clock.jump(90 * 60_000);
    await clock.advance(70_000);
    expect(runs.length).toBeLessThanOrEqual(4);
    expect(lines.filter((l) => l.level === 'warn' || l.level === 'error')).toEqual([]);
    job.stop();
  });

  it('a backward jump of 3 minutes does not stall it for 3 minutes, and no match runs twice', async () => {
    const { clock, runs, job } = setup();
    await clock.advance(25_000); // just before 05:00:30
    clock.jump(-3 * 60_000);
    await clock.advance(60_000);
    expect(runs.length).toBeGreaterThanOrEqual(2);
    expect(new Set(runs).size).toBe(runs.length);
    job.stop();
  });

  for (const [step, label] of [
    [3 * 60_000, '3 minutes'],
    [3 * 3_600_000, '3 hours'],
  ] as const) {
    it(`a backward step of ${label} after a run: the next run is within one period, and it keeps its period`, async () => {
      const { clock, runs, job } = setup();
      await clock.advance(25_000); // the run at 05:00:30
      expect(runs).toHaveLength(1);
      clock.jump(-step);
      await clock.advance(30_000);
      expect(runs).toHaveLength(2);
      await clock.advance(60_000);
      expect(runs).toHaveLength(4);
      expect(new Set(runs).size).toBe(runs.length);
      job.stop();
    });
  }

  it('never runs over a run still under way', async () => {
    const { clock, runs, job, setHold } = setup();
    let release: () => void = () => undefined;
    setHold(new Promise((r) => (release = r)));
    await clock.advance(95_000);
    expect(runs).toHaveLength(1);
    release();
    setHold(null);
    await clock.advance(30_000);
    expect(runs).toHaveLength(2);
    job.stop();
  });

  it('leaves no timer behind when stopped', async () => {
    const { clock, job } = setup('17 3 * * *');
    job.stop();
    expect(clock.timerCount).toBe(0);
  });
});
