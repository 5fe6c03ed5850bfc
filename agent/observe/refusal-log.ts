import type { Clock, Timer } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from './metrics.js';

/** How often repeated refusals are summed up in one log line. */
export const SUMMARY_INTERVAL_MS = 60_000;

/**
 * Refused requests (bad signatures, oversized bodies, dropped connections...) written to the log
 * without letting a flood of them flood the journal: the first of each kind in a minute is logged
 * as it happens, the rest are counted and summed up in one line a minute later. Every refusal is
 * counted in /metrics (chair_agent_refused_requests_total). Owns its timer (start/stop).
 */
export class RefusalLog {
  private counts = new Map<string, number>();
  private timer: Timer | null = null;

  constructor(private readonly deps: { clock: Clock; logger: Logger; metrics?: Metrics }) {}

  start(): void {}

  stop(): void {
    this.timer?.cancel();
    this.timer = null;
    this.summarise();
  }

  /** One refusal of `what` (webhook, http, ...) answered or closed with `status`. */
  note(what: string, status: string, message: string, detail: Record<string, unknown> = {}): void {
    this.deps.metrics?.refused.inc({ what, status });
    const key = `${what} ${status}`;
    const seen = this.counts.get(key);
    if (seen === undefined) {
      this.counts.set(key, 0);
      this.deps.logger.warn({ what, status, ...detail }, message);
    } else {
      this.counts.set(key, seen + 1);
    }
    this.timer ??= this.deps.clock.setTimeout(() => {
      this.timer = null;
      this.summarise();
    }, SUMMARY_INTERVAL_MS);
  }

  private summarise(): void {
    const repeated = [...this.counts].filter(([, n]) => n > 0);
    this.counts = new Map();
    if (repeated.length === 0) return;
    const total = repeated.reduce((sum, [, n]) => sum + n, 0);
    this.deps.logger.warn({ refused: Object.fromEntries(repeated), seconds: SUMMARY_INTERVAL_MS / 1000 }, `refused ${total} more request(s) like those above in the last minute`);
  }
}
