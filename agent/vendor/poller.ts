import type { Clock, Timer } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import type { Health } from '../observe/health.js';
import type { ChairRegistry } from '../core/chair-registry.js';
import type { ChairReading, VendorApi } from './vendor-api.js';
import { isVendorError } from './errors.js';
import { errorMessage } from '../platform/errors.js';
import { boundedRetryAfter } from '../core/backoff.js';
import type { VendorClock } from '../time/vendor-clock.js';
import type { Component } from '../platform/component.js';

export interface PollerDeps {
  vendor: VendorApi;
  registry: ChairRegistry;
  health: Health;
  clock: Clock;
  vendorClock: VendorClock;
  logger: Logger;
  periodMs: number;
  /** The longest wait a vendor's Retry-After may impose (vendor.maxRetryAfterSeconds). */
  maxRetryAfterMs: number;
  timeZone: string;
  onPoll?: (ok: boolean) => void;
  /** vendor.location: chairs of other sites are left out. */
  keepChair?: ((chair: ChairReading) => boolean) | undefined;
}

/**
 * One chair-list request per period, whatever the number of chairs. The next poll is scheduled
 * when the previous one has finished, so a slow vendor delays polls instead of stacking them.
 * A failed poll is not retried early: the next period is the retry, or the vendor's Retry-After
 * when longer, up to vendor.maxRetryAfterSeconds (an hour-long Retry-After would leave the
 * buttons dead for an hour). Freshness runs on the monotonic clock; each list's ServerTime sets
 * the vendor clock the transaction sync follows, and is checked against this box's clock.
 */
export class Poller implements Component {
  readonly name = 'poller';
  private timer: Timer | null = null;
  private staleTimer: Timer | null = null;
  private abort: AbortController | null = null;
  private running = false;
  private inFlight: Promise<number | undefined> | null = null;

  constructor(private readonly deps: PollerDeps) {}

  start(): void {
    this.running = true;
    this.abort = new AbortController();
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.running = false;
    this.timer?.cancel();
    this.staleTimer?.cancel();
    this.timer = this.staleTimer = null;
    this.abort?.abort();
    await this.inFlight;
  }

  /** Runs one poll now, or joins the one under way. Resolves to the vendor's Retry-After, if any. */
  pollOnce(): Promise<number | undefined> {
    if (!this.inFlight) {
      this.inFlight = this.cycle().finally(() => {
        this.inFlight = null;
      });
    }
    return this.inFlight;
  }

  private schedule(delayMs: number): void {
    if (!this.running) return;
    this.timer = this.deps.clock.setTimeout(() => {
      this.timer = null;
      const started = this.deps.clock.monotonic();
      void this.pollOnce().then((retryAfter) => {
        const elapsed = this.deps.clock.monotonic() - started;
        const { periodMs, maxRetryAfterMs } = this.deps;
        this.schedule(retryAfter === undefined ? Math.max(0, periodMs - elapsed) : boundedRetryAfter(retryAfter, periodMs, maxRetryAfterMs));
      });
    }, delayMs);
  }

  private async cycle(): Promise<number | undefined> {
    const { vendor, registry, health, clock, logger } = this.deps;
    let retryAfter: number | undefined;
    try {
      const sent = clock.monotonic();
      const list = await vendor.listChairs({ signal: this.abort?.signal, retries: 0 });
      const received = clock.monotonic();
      registry.applyList(this.deps.keepChair ? list.chairs.filter(this.deps.keepChair) : list.chairs, received);
      health.lastPollAt = clock.now();
      const serverTime = list.chairs.find((c) => c.serverTime !== null)?.serverTime;
      if (serverTime && this.deps.vendorClock.observe(serverTime, sent, received)) this.checkClock();
      if (health.set('vendor', true, 'chair list fresh')) logger.info({ chairs: list.chairs.length }, 'vendor API reachable');
      if (list.rejected.length > 0) logger.warn({ problems: list.rejected }, 'chair list had entries that are not chairs; left out');
      this.deps.onPoll?.(true);
    } catch (err) {
      if (!this.running || (isVendorError(err) && err.code === 'VENDOR_ABORTED')) return undefined;
      const detail = errorMessage(err);
      if (health.set('vendor', false, detail)) {
        logger.warn({ code: isVendorError(err) ? err.code : undefined, err: detail }, 'chair list poll failed');
      }
      if (isVendorError(err)) retryAfter = err.retryAfterMs;
      this.deps.onPoll?.(false);
    }
    registry.refreshAvailability(clock.monotonic());
    this.armStaleCheck();
    return retryAfter;
  }

  /** This box's clock against the vendor's: a Pi's clock, or site.timezone, may be wrong. */
  private checkClock(): void {
    const { clock, health, logger } = this.deps;
    const report = this.deps.vendorClock.compare(clock.now(), clock.monotonic(), this.deps.timeZone);
    if (!report) return;
    const was = health.get('clock');
    // The detail names the difference to the minute, so a steady skew does not flap it.
    if (this.clockReported && was.ok === report.ok && (report.ok || Math.abs(report.skewMs - this.lastSkew) < 60_000)) return;
    this.clockReported = true;
    this.lastSkew = report.skewMs;
    health.set('clock', report.ok, report.detail);
    if (report.ok) logger.info({ skewMs: Math.round(report.skewMs) }, 'this clock agrees with the vendor\'s');
    else logger.warn({ skewMs: Math.round(report.skewMs) }, report.detail);
  }

  private lastSkew = 0;
  private clockReported = false;

  /** Turns chairs offline at the moment the list goes stale, even while a poll hangs. */
  private armStaleCheck(): void {
    this.staleTimer?.cancel();
    this.staleTimer = null;
    const at = this.deps.registry.staleAt();
    if (!this.running || at === null) return;
    const delay = at - this.deps.clock.monotonic();
    if (delay < 0) return;
    this.staleTimer = this.deps.clock.setTimeout(() => {
      this.staleTimer = null;
      this.deps.registry.refreshAvailability(this.deps.clock.monotonic());
    }, delay + 1);
  }
}
