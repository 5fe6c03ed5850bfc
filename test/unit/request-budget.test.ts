import { describe, expect, it } from 'vitest';
import { RequestBudget, type Admit } from '../../agent/mqtt/request-budget.js';
import { FakeClock } from '../helpers/fake-clock.js';

const tally = (budget: RequestBudget, lane: string, n: number): Record<Admit, number> => {
  const out: Record<Admit, number> = { serve: 0, refuse: 0, drop: 0 };
  for (let i = 0; i < n; i++) out[budget.admit(lane)] += 1;
  return out;
};

describe('the budget for requests that come over MQTT', () => {
  it('carries out a burst, then a few a second; answers the next ones rate_limited; drops the rest', async () => {
    const clock = new FakeClock();
    const budget = new RequestBudget({ clock, perLane: { perSecond: 10, burst: 20 }, refusalsPerLane: { perSecond: 5, burst: 5 } });
    expect(tally(budget, 'bridge info', 1000)).toEqual({ serve: 20, refuse: 5, drop: 975 });
    await clock.advance(1_000);
    expect(tally(budget, 'bridge info', 1000)).toEqual({ serve: 10, refuse: 5, drop: 985 });
    // Quiet for a while: the burst is there again, no more.
    await clock.advance(60_000);
    expect(tally(budget, 'bridge info', 30)).toEqual({ serve: 20, refuse: 5, drop: 5 });
  });

  it('a flood in one lane leaves the others their share, up to the total', () => {
    const clock = new FakeClock();
    const budget = new RequestBudget({ clock, perLane: { perSecond: 10, burst: 20 }, total: { perSecond: 50, burst: 50 } });
    tally(budget, 'start MC7001', 1000);
    expect(tally(budget, 'start MC7002', 5)).toEqual({ serve: 5, refuse: 0, drop: 0 });
    expect(tally(budget, 'bridge info', 20).serve).toBe(20);
    // 45 served so far of a total of 50: every lane gets what is left, and no more.
    expect(tally(budget, 'bridge health_check', 20).serve).toBe(5);
  });

  it('drops everything while too many answers wait for the broker, and serves again once they are taken', async () => {
    const clock = new FakeClock();
    const budget = new RequestBudget({ clock, maxAnswersWaiting: 3 });
    const acks: (() => void)[] = [];
    const sent = Array.from({ length: 3 }, () => budget.answering(new Promise<void>((resolve) => acks.push(resolve))));
    expect(budget.answersWaiting).toBe(3);
    expect(tally(budget, 'bridge info', 5)).toEqual({ serve: 0, refuse: 0, drop: 5 });
    acks[0]?.();
    await sent[0];
    expect(budget.answersWaiting).toBe(2);
    expect(budget.admit('bridge info')).toBe('serve');
    // A failed answer is no longer waiting either.
    const failing = budget.answering(Promise.reject(new Error('disconnected')));
    await expect(failing).rejects.toThrow('disconnected');
    expect(budget.answersWaiting).toBe(2);
  });

  it('keeps a bounded number of lanes: past it, new names share one', () => {
    const clock = new FakeClock();
    const budget = new RequestBudget({ clock, maxLanes: 2, perLane: { perSecond: 1, burst: 1 }, refusalsPerLane: { perSecond: 1, burst: 1 } });
    expect(budget.admit('a')).toBe('serve');
    expect(budget.admit('b')).toBe('serve');
    expect(budget.admit('c')).toBe('serve');
    // "d" shares "c"'s overflow lane, whose burst "c" took.
    expect(budget.admit('d')).toBe('refuse');
    expect(budget.admit('e')).toBe('drop');
    expect(budget.admit('a')).toBe('refuse');
  });
});
