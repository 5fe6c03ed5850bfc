import type { Metrics } from '../observe/metrics.js';
import type { DaySummary } from './day-tally.js';

/**
 * Today's figures on /metrics, per chair, read at scrape time. They are counters of the site's
 * day: they only grow during the day and go back to 0 at the site's midnight, which Prometheus's
 * increase() and rate() take as a counter reset; the value itself reads as "today so far". Takings
 * are floats here (dashboards sum them); the exact decimal strings are on B/summary.
 */
export function registerTodayMetrics(metrics: Metrics, today: () => DaySummary): void {
  const chairs = (): [string, DaySummary['chairs'][string]][] => Object.entries(today().chairs);
  metrics.readFamily('chair_agent_day_uses_total', "Uses of the chair in the site's day so far (back to 0 at midnight, site.timezone)", 'counter', ['device_id'], () =>
    chairs().map(([id, c]) => [{ device_id: id }, c.uses]),
  );
  metrics.readFamily('chair_agent_day_minutes_total', "Minutes of use of the chair in the site's day so far (PlayTime)", 'counter', ['device_id'], () =>
    chairs().map(([id, c]) => [{ device_id: id }, c.minutes]),
  );
  metrics.readFamily('chair_agent_day_takings_total', "Takings of the chair in the site's day so far, by payment method (exact figures on B/summary)", 'counter', ['device_id', 'method'], () =>
    chairs().flatMap(([id, c]) => Object.entries(c.takings).map(([method, amount]): [Record<'device_id' | 'method', string>, number] => [{ device_id: id, method }, Number(amount)])),
  );
}
