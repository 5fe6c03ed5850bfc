import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { Health } from '../health.js';
import type { Metrics } from '../metrics.js';
import type { Scheduler, ScheduledJob } from '../scheduler.js';
import { errorMessage } from '../errors.js';
import { formatIsoWithOffset, formatVendorTime } from '../core/vendor-time.js';
import { StoreError, type Outbox } from '../store/outbox.js';
import type { VendorApi } from '../vendor/vendor-api.js';
import type { Component } from './component.js';

export type TimeFormat = 'local' | 'iso' | 'unix' | 'unix-ms';

export const CURSOR_KEY = 'sync.cursor';
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
  logger: Logger;
  health: Health;
  metrics: Metrics;
  settings: SyncSettings;
}

export interface SyncResult {
  windows: number;
  requests: number;
  records: number;
  inserted: number;
}

export function formatQueryTime(ms: number, format: TimeFormat, timeZone: string): string {
  switch (format) {
    case 'local':
      return formatVendorTime(ms, timeZone);
    case 'iso':
      return formatIsoWithOffset(ms, timeZone);
    case 'unix':
      return String(Math.floor(ms / 1000));
    case 'unix-ms':
      return String(Math.floor(ms));
  }
}

/**
 * Pulls the transaction list on a schedule, window by window from a cursor, paging by offset
 * until a short page. Each window re-reads `overlap` before the cursor, so a late record or a
 * playing -> finished change is not missed. The cursor only moves after the window's records
 * are committed, and is only written when the window brought something new (no idle writes).
 * A vendor error leaves the cursor where it was; the next run starts from it again.
 */
export class TransactionSync implements Component {
  readonly name = 'transaction-sync';
  private job: ScheduledJob | null = null;
  private running: Promise<SyncResult> | null = null;
  private abort = new AbortController();
  /**
   * The end of the last completed window, in memory: ahead of the persisted one while idle.
   * Undefined until read from the store; null when no sync ever stored anything.
   */
  private cursor: number | null | undefined = undefined;

  constructor(private readonly deps: SyncDeps) {}

  start(): void {
    this.abort = new AbortController();
    this.job = this.deps.scheduler.schedule(this.deps.settings.schedule, 'transaction-sync', () => this.runSafe());
    void this.runSafe();
  }

  async stop(): Promise<void> {
    this.job?.stop();
    this.job = null;
    this.abort.abort();
    await this.running?.catch(() => undefined);
  }

  /** One run now; joins the run under way instead of overlapping it. */
  run(): Promise<SyncResult> {
    if (!this.running) {
      this.running = this.sync().finally(() => {
        this.running = null;
      });
    }
    return this.running;
  }

  private async runSafe(): Promise<void> {
    try {
      await this.run();
    } catch {
      // reported inside sync()
    }
  }

  private async sync(): Promise<SyncResult> {
    const { settings: s, vendor, outbox, clock, logger, metrics, health } = this.deps;
    const result: SyncResult = { windows: 0, requests: 0, records: 0, inserted: 0 };
    const now = clock.now();
    if (this.cursor === undefined) {
      const saved = Number(outbox.getState(CURSOR_KEY));
      this.cursor = Number.isFinite(saved) && saved > 0 ? saved : null;
    }
    let from = this.cursor === null ? now - s.lookbackMs : this.cursor - s.overlapMs;
    try {
      do {
        const to = Math.min(from + s.windowMs, now);
        let insertedInWindow = 0;
        let previousFirst = '';
        for (let pageNo = 0, offset = 0; ; pageNo++, offset += s.pageSize) {
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
            logger.warn({ rejected: page.rejected }, 'transaction list had elements that are not records; left out');
          }
          const first = page.records[0] ? `${page.records[0].transactionId}/${page.records[0].status}` : '';
          if (pageNo > 0 && first !== '' && first === previousFirst) throw new Error('the vendor returned the same page twice: it does not honour offset');
          previousFirst = first;
          const inserted = outbox.insert(page.records, 'poll', clock.now());
          insertedInWindow += inserted;
          metrics.syncRecords.inc({ outcome: 'new' }, inserted);
          metrics.syncRecords.inc({ outcome: 'known' }, page.records.length - inserted);
          if (page.size < s.pageSize) break;
        }
        // The window's records are committed; now the cursor may move past them.
        if (insertedInWindow > 0) outbox.setState(CURSOR_KEY, String(to));
        this.cursor = to;
        result.windows += 1;
        result.inserted += insertedInWindow;
        from = to;
      } while (from < now);
      health.lastSyncAt = clock.now();
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
}
