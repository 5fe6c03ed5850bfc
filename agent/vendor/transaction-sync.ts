import type { Clock, Timer } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import type { Health } from '../observe/health.js';
import type { Metrics } from '../observe/metrics.js';
import type { Scheduler, ScheduledJob } from '../time/scheduler.js';
import { errorMessage } from '../platform/errors.js';
import type { VendorClock } from '../time/vendor-clock.js';
import { formatIsoWithOffset, formatNaive, instantToNaive, naiveToInstant, parseNaive } from '../time/vendor-time.js';
import { StoreError, type Annotate, type Outbox } from '../store/outbox.js';
import type { TransactionRecord, VendorApi } from './vendor-api.js';
import type { Component } from '../platform/component.js';

export type TimeFormat = 'local' | 'iso' | 'unix' | 'unix-ms';

/** The end of the last window read, in the vendor's wall time ("YYYY-MM-DD HH:MM:SS"). */
export const CURSOR_KEY = 'sync.cursor.vendor';
/** Before version 2 the cursor was this box's epoch milliseconds. */
const OLD_CURSOR_KEY = 'sync.cursor';
/** A vendor that ignores `offset` would page forever; no window has more pages than this. */
const MAX_PAGES = 10_000;

export interface SyncSettings {
  schedule: string;
  pageSize: number;
  lookbackMs: number;
  overlapMs: number;
  windowMs: number;
  timeFormat: TimeFormat;
  timeZone: string;
}

export interface SyncDeps {
  vendor: VendorApi;
  outbox: Outbox;
  scheduler: Scheduler;
  clock: Clock;
  vendorClock: VendorClock;
  logger: Logger;
  health: Health;
  metrics: Metrics;
  settings: SyncSettings;
  /** vendor.location: records of other sites are left out. */
  keep?: ((record: TransactionRecord) => boolean) | undefined;
  /** POS correlation for the records stored. */
  annotate?: Annotate | undefined;
  /**
   * How long after start the schedule is set up and the first sync runs. The agent waits a
   * second: by then the first poll has given the vendor's ServerTime (the first windows follow the
   * vendor's clock), and setting up the schedule stays off start-up's path to the first state.
   */
  firstRunDelayMs?: number;
}

export interface SyncResult {
  windows: number;
  requests: number;
  records: number;
  inserted: number;
}

/** from/to in the configured format, from a naive vendor time. */
export function formatQueryTime(naive: number, format: TimeFormat, timeZone: string): string {
  switch (format) {
    case 'local':
      return formatNaive(naive);
    case 'iso':
      return formatIsoWithOffset(naiveToInstant(naive, timeZone), timeZone);
    case 'unix':
      return String(Math.floor(naiveToInstant(naive, timeZone) / 1000));
    case 'unix-ms':
      return String(Math.floor(naiveToInstant(naive, timeZone)));
  }
}

/**
 * Pulls the transaction list on a schedule, window by window from a cursor. Each window
 * re-reads `overlap` before the cursor, so a late record or a playing -> finished change is not
 * missed. The cursor moves only after the window's records are committed, and is written only
 * when the window brought something new (no idle writes). A vendor error leaves it where it was.
 *
 * Windows are in the vendor's time, not this box's: "now" is the vendor's clock as its last
 * ServerTime said (VendorClock), so a box whose clock is ahead or behind, jumps at boot, or is set
 * to another zone than the vendor speaks still asks for the right records. Before the first
 * ServerTime the box's own clock, in site.timezone, stands in.
 *
 * Paging follows what the vendor returns, not what was asked: the next offset is the records
 * received so far, and a short page is the last only once the vendor's own page cap is known (a
 * vendor that silently caps `limit` answers every page short). An empty page always ends it.
 */
export class TransactionSync implements Component {
  readonly name = 'transaction-sync';
  private job: ScheduledJob | null = null;
  private running: Promise<SyncResult> | null = null;
  /** The run asked for while one was under way: it starts when that one ends. */
  private next: Promise<SyncResult> | null = null;
  private abort = new AbortController();
  /** The end of the last completed window (naive vendor time); undefined until read from the store. */
  private cursor: number | null | undefined = undefined;
  /** The vendor's own cap on `limit`, once seen (a short page followed by more records). */
  private vendorCap: number | null = null;
  private warnedNoVendorTime = false;

  constructor(private readonly deps: SyncDeps) {}

  start(): void {
    this.abort = new AbortController();
    const begin = (): void => {
      this.beginTimer = null;
      this.job = this.deps.scheduler.schedule(this.deps.settings.schedule, 'transaction-sync', () => this.runSafe());
      void this.runSafe();
    };
    const delay = this.deps.firstRunDelayMs ?? 0;
    if (delay > 0) this.beginTimer = this.deps.clock.setTimeout(begin, delay);
    else begin();
  }

  private beginTimer: Timer | null = null;

  async stop(): Promise<void> {
    this.beginTimer?.cancel();
    this.beginTimer = null;
    this.job?.stop();
    this.job = null;
    this.abort.abort();
    await this.running?.catch(() => undefined);
    await this.next?.catch(() => undefined);
  }

  /**
   * A run that reads the vendor's list after this call. Runs never overlap: while one is under
   * way (it may have read its pages already), one more is queued to start when it ends, and every
   * call made meanwhile shares that one. Joining the run under way instead would answer a `sync`
   * request, or a scheduled run, with a list read before the records it was asked for.
   */
  run(): Promise<SyncResult> {
    if (this.next) return this.next;
    if (!this.running) return this.begin();
    this.next = this.running
      .catch(() => undefined)
      .then(() => {
        this.next = null;
        if (this.abort.signal.aborted) throw new Error('the transaction sync is stopping');
        return this.begin();
      });
    return this.next;
  }

  private begin(): Promise<SyncResult> {
    this.running = this.sync().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async runSafe(): Promise<void> {
    try {
      await this.run();
    } catch {
      // reported inside sync()
    }
  }

  /** The vendor's wall time now (naive), or this box's in site.timezone before any ServerTime. */
  private vendorNow(): number {
    const { vendorClock, clock, settings, logger } = this.deps;
    const v = vendorClock.now(clock.monotonic());
    if (v !== null) return v;
    if (!this.warnedNoVendorTime) {
      this.warnedNoVendorTime = true;
      logger.warn('no ServerTime from the vendor yet: this sync uses this box\'s clock in site.timezone');
    }
    return instantToNaive(clock.now(), settings.timeZone);
  }

  private readCursor(): number | null {
    const { outbox, settings } = this.deps;
    const saved = outbox.state.get(CURSOR_KEY);
    const naive = saved === undefined ? null : parseNaive(saved);
    if (naive !== null) return naive;
    const old = Number(outbox.state.get(OLD_CURSOR_KEY));
    return Number.isFinite(old) && old > 0 ? instantToNaive(old, settings.timeZone) : null;
  }

  private async sync(): Promise<SyncResult> {
    const { settings: s, outbox, logger, metrics, health } = this.deps;
    const result: SyncResult = { windows: 0, requests: 0, records: 0, inserted: 0 };
    try {
      if (this.cursor === undefined) this.cursor = this.readCursor();
      const now = this.vendorNow();
      // A vendor clock set back (or a cursor from a box that was ahead) must not leave a gap.
      let from = this.cursor === null ? now - s.lookbackMs : Math.min(this.cursor, now) - s.overlapMs;
      do {
        const to = Math.min(from + s.windowMs, now);
        const inWindow = await this.readWindow(from, to, result);
        // The window's records are committed; now the cursor may move past them.
        if (inWindow > 0) await outbox.state.set(CURSOR_KEY, formatNaive(to));
        this.cursor = to;
        result.windows += 1;
        result.inserted += inWindow;
        from = to;
      } while (from < now);
      health.synced(this.deps.clock.now());
      metrics.syncRuns.inc({ outcome: 'ok' });
      if (result.inserted > 0) logger.info(result, 'transaction sync brought new records');
      else logger.debug(result, 'transaction sync: nothing new');
      return result;
    } catch (err) {
      metrics.syncRuns.inc({ outcome: 'error' });
      if (this.abort.signal.aborted) throw err;
      const detail = errorMessage(err);
      if (err instanceof StoreError) logger.error({ code: err.code, err: detail }, 'cannot store synced transactions; the cursor stays');
      else logger.warn({ err: detail, ...result }, 'transaction sync failed; the next run starts again from the cursor');
      throw err;
    }
  }

  /** Every page of one window, stored; returns how many records were new. */
  private async readWindow(from: number, to: number, result: SyncResult): Promise<number> {
    const { settings: s, vendor, outbox, clock, logger, metrics } = this.deps;
    let inserted = 0;
    let previousFirst = '';
    let offset = 0;
    /** A short page whose next page is being read to see whether it was the last. */
    let shortPage: number | null = null;
    for (let pageNo = 0; ; pageNo++) {
      if (pageNo >= MAX_PAGES) throw new Error(`more than ${MAX_PAGES} pages in one window: does the vendor honour offset?`);
      const page = await vendor.listTransactions(
        {
          from: formatQueryTime(from, s.timeFormat, s.timeZone),
          to: formatQueryTime(to, s.timeFormat, s.timeZone),
          limit: s.pageSize,
          offset,
          order: 'chronological',
        },
        { signal: this.abort.signal },
      );
      result.requests += 1;
      result.records += page.records.length;
      if (page.rejected.length > 0) {
        metrics.syncRecords.inc({ outcome: 'rejected' }, page.rejected.length);
        logger.warn({ rejected: page.rejected.slice(0, 20), count: page.rejected.length }, 'transaction list had elements that are not records; left out');
      }
      const first = page.records[0] ? `${page.records[0].transactionId}/${page.records[0].status}` : '';
      if (pageNo > 0 && first !== '' && first === previousFirst) throw new Error('the vendor returned the same page twice: it does not honour offset');
      previousFirst = first;
      const kept = this.deps.keep ? page.records.filter(this.deps.keep) : page.records;
      const n = (await outbox.storeDurably(kept, 'poll', clock.now(), this.deps.annotate)).filter(Boolean).length;
      inserted += n;
      metrics.syncRecords.inc({ outcome: 'new' }, n);
      metrics.syncRecords.inc({ outcome: 'known' }, kept.length - n);
      if (kept.length < page.records.length) metrics.syncRecords.inc({ outcome: 'other_location' }, page.records.length - kept.length);
      if (page.size === 0) {
        // The short page before was the last after all: its size is not the vendor's cap.
        if (shortPage !== null && this.notCap.size < 64) this.notCap.add(shortPage);
        break;
      }
      if (shortPage !== null && this.vendorCap === null) {
        // More came after a short page: that page was full by the vendor's own limit.
        this.vendorCap = shortPage;
        logger.warn({ pageSize: s.pageSize, vendorCap: shortPage }, 'the vendor returns at most this many records per request, fewer than transactions.pageSize: paging by what it returns');
      }
      shortPage = null;
      offset += page.size;
      // The cap, if any, is at least every page size seen, and none of the sizes shown not to be it.
      const isLast = page.size < s.pageSize && (this.vendorCap !== null ? page.size < this.vendorCap : page.size < this.largestPage || this.notCap.has(page.size));
      this.largestPage = Math.max(this.largestPage, page.size);
      if (isLast) break;
      if (page.size < s.pageSize) shortPage = page.size;
    }
    return inserted;
  }

  /** The most records the vendor ever returned for one request: a shorter page is not its cap. */
  private largestPage = 0;
  /** Short page sizes that were followed by an empty page: not the cap. */
  private readonly notCap = new Set<number>();
}
