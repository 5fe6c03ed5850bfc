import cron from 'node-cron';
import { describe, expect, it } from 'vitest';
import { nextInstant, wallMatcher } from '../../agent/time/cron-next.js';
import { zoneOffsets } from '../../agent/time/time-zone.js';

const at = (iso: string): number => Date.parse(iso);
const iso = (t: number): string => new Date(t).toISOString();

function next(expression: string, zone: string, after: number): number {
  const offsetAt = zoneOffsets(zone);
  if (!offsetAt) throw new Error(zone);
  return nextInstant(wallMatcher(expression), after, offsetAt);
}

/** node-cron's own answer (through Intl), as the reference. */
function nodeCronNext(expression: string, zone: string, after: number): number {
  const task = cron.createTask(expression, () => undefined, { timezone: zone });
  const matcher = (task as unknown as { timeMatcher: { getNextMatch(d: Date): Date } }).timeMatcher;
  void task.destroy();
  return matcher.getNextMatch(new Date(after)).getTime();
}

describe('the next match of a cron expression, without Intl', () => {
  it('agrees with node-cron on every kind of field, in zones with and without daylight saving', () => {
    const expressions = ['*/30 * * * * *', '0 3 * * *', '15 */2 * * 1-5', '0 0 L * *', '0 0 15W * *', '0 0 LW * *', '0 0 L-3 * *',
      '0 0 * * 5L', '0 0 * * 1#2', '@daily', '@hourly', '0 0 1-7 * MON', '0 0 29 2 *', '10,20 5 4 * JAN,JUL SUN'];
    const zones = ['Asia/Bangkok', 'America/New_York', 'Asia/Kolkata', 'UTC'];
    // Away from the hours whose clocks go back, where node-cron skips the repeated hour (below).
    const bases = ['2026-11-22T05:00:10Z', '2026-12-31T23:59:59.500Z', '2027-02-27T12:00:00Z', '2028-02-28T22:00:00Z', '2026-06-30T16:59:59Z'];
    for (const expression of expressions) {
      for (const zone of zones) {
        for (const base of bases) {
          const t = at(base);
          expect({ expression, zone, base, next: iso(next(expression, zone, t)) }).toEqual({ expression, zone, base, next: iso(nodeCronNext(expression, zone, t)) });
        }
      }
    }
  });

  it('skips a wall time the clocks jump over', () => {
    // Berlin, 29 March 2026: 02:00 CET becomes 03:00 CEST; 02:30 does not exist that night.
    expect(iso(next('0 30 2 * * *', 'Europe/Berlin', at('2026-03-28T23:00:00Z')))).toBe('2026-03-30T00:30:00.000Z');
  });

  it('keeps a frequent schedule running through the hour the clocks go back', () => {
    // Berlin, 25 October 2026: 03:00 CEST becomes 02:00 CET; the half hours after 02:30 CEST
    // come a quarter of an hour later at 02:00 CET, not an hour and a quarter.
    expect(iso(next('0 */30 * * * *', 'Europe/Berlin', at('2026-10-25T00:45:00Z')))).toBe('2026-10-25T01:00:00.000Z');
    expect(iso(next('0 */30 * * * *', 'Europe/Berlin', at('2026-10-25T01:00:00Z')))).toBe('2026-10-25T01:30:00.000Z');
    expect(iso(next('0 */30 * * * *', 'Europe/Berlin', at('2026-10-25T01:30:00Z')))).toBe('2026-10-25T02:00:00.000Z');
  });

  it('is strictly after the instant it is given, to the millisecond', () => {
    expect(iso(next('*/30 * * * * *', 'Asia/Bangkok', at('2026-11-22T05:00:30.000Z')))).toBe('2026-11-22T05:01:00.000Z');
    expect(iso(next('*/30 * * * * *', 'Asia/Bangkok', at('2026-11-22T05:00:29.999Z')))).toBe('2026-11-22T05:00:30.000Z');
  });
});
