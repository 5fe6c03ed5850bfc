import type { Clock, Timer } from '../platform/clock.js';
import type { Component } from '../platform/component.js';
import type { VendorClock } from '../time/vendor-clock.js';
import { formatNaive, formatVendorTime, parseNaive } from '../time/vendor-time.js';
import { errorMessage } from '../platform/errors.js';
import type { Logger } from '../platform/logger.js';
import type { Broker } from '../mqtt/broker.js';
import type { BrokerSizeLimit } from '../mqtt/size-limit.js';
import type { StoredRecord } from '../store/outbox.js';
import { DayTally, type DaySummary } from './day-tally.js';
import { formatDecimal, ZERO } from './decimal.js';

/** What the summary reads from the store: the first record received since a time, records holding a text, and new ones as committed. */
export interface SummarySource {
  range(q: { from: number }, limit: number): StoredRecord[];
  containing(text: string, fromSeq: number, toSeq: number): StoredRecord[];
  lastSeq(): number;
  on(event: 'stored', listener: (records: readonly StoredRecord[]) => void): unknown;
  off(event: 'stored', listener: (records: readonly StoredRecord[]) => void): unknown;
}

/**
 * The chairs the site knows (configured, and those the vendor lists): the registry, which tells of
 * a chair's first state (a chair new to it) and of a chair gone.
 */
export interface KnownChairs {
  knownIds(): string[];
  on(event: 'state', listener: (state: { deviceId: string }) => void): unknown;
  on(event: 'removed', listener: (deviceId: string) => void): unknown;
  off(event: 'state', listener: (state: { deviceId: string }) => void): unknown;
  off(event: 'removed', listener: (deviceId: string) => void): unknown;
}

export interface TodayDeps {
  source: SummarySource;
  broker: Broker;
  /** B/summary. */
  topic: string;
  /** B/chairs/<DeviceId>/today. */
  chairTopic: (deviceId: string) => string;
  chairs: KnownChairs;
  /** What the broker takes: a summary it would not is sent without its chairs. */
  sizeLimit: BrokerSizeLimit;
  clock: Clock;
  vendorClock: VendorClock;
  timeZone: string;
  /** site.currency, said with the takings when the site names one. */
  currency?: string | undefined;
  logger: Logger;
}

const DAY_MS = 86_400_000;
/** Rows looked at per slice when the day is counted from the store (the event loop is free between slices). */
const SLICE = 2_000;
/** How far back (by time of receipt) today's records are looked for: a day, and a day of late records. */
const LOOK_BACK_MS = 2 * DAY_MS;
/** A day holds at most this many uses (a busy site has about a thousand); past it the summary says it is capped. */
export const MAX_USES = 50_000;
/** The day is looked at again at least this often (a clock set, a vendor clock learned). */
const LOOK_AGAIN_MS = 3_600_000;
/** B/summary at most once a second, however many records a commit brings. */
const PUBLISH_GAP_MS = 1_000;
/** Above this the per-chair part is left out of B/summary (the broker's payload limit; bridge/info rules apply). */
const MAX_PAYLOAD_BYTES = 15 * 1024;
/** A chair's takings on a day it had no use. */
const NO_TAKINGS = formatDecimal(ZERO);

/**
 * The summary without its chairs (each chair's day has its own topic), saying how many it left
 * out: what goes where the broker does not take the whole one.
 */
export function summaryWithoutChairs<T extends { chairs: Record<string, unknown> }>(s: T): T & { chairsOmitted: number } {
  return { ...s, chairs: {}, chairsOmitted: Object.keys(s.chairs).length };
}

/**
 * Today at a glance: uses, minutes and takings by payment method, per chair and for the site, in
 * the site's day. Counted from the records the agent holds (read from the store at start, in
 * slices, then from each commit), published retained on B/summary when it changes (at most once a
 * second), and read by the status page and /metrics. Each chair the site knows also has its own
 * day retained on B/chairs/<DeviceId>/today (zeros when it had no use), published when it changes:
 * a consumer of one chair (Home Assistant's entities, a sign) reads a small payload that is there
 * however many chairs the site has, where B/summary leaves the chairs out past the broker's limit.
 * The bridge clears it with the chair's other retained topics when the chair is gone. The day is the vendor's date, read in
 * site.timezone, as its records are stamped (a Pi's clock may be wrong at boot), else this box's.
 */
export class TodaySummary implements Component {
  readonly name = 'today';
  private tally: DayTally;
  private capped = false;
  private loading: NodeJS.Immediate | null = null;
  private dayTimer: Timer | null = null;
  private publishTimer: Timer | null = null;
  private lastPublished = '';
  /** Whether the log said once that the summary leaves its chairs out for the broker's limit. */
  private toldOverBroker = false;
  /** Each chair's day as last published (retained), by DeviceId. */
  private lastPublishedChairs = new Map<string, string>();
  private started = false;

  constructor(private readonly deps: TodayDeps) {
    this.tally = new DayTally('', deps.timeZone);
  }

  private readonly onStored = (records: readonly StoredRecord[]): void => {
    if (this.count(records)) this.publishSoon();
  };

  private readonly onConnect = (): void => {
    this.lastPublished = '';
    this.lastPublishedChairs.clear();
    this.publish();
  };

  /** A chair new to the site: its day is published soon. A state of a known one costs a lookup. */
  private readonly onChairState = (state: { deviceId: string }): void => {
    if (!this.lastPublishedChairs.has(state.deviceId)) this.publishSoon();
  };

  /** A chair gone (the bridge clears its topics): forgotten here, so its day is sent afresh if it returns. */
  private readonly onChairRemoved = (deviceId: string): void => {
    this.lastPublishedChairs.delete(deviceId);
  };

  start(): void {
    this.started = true;
    this.deps.source.on('stored', this.onStored);
    this.deps.broker.on('connect', this.onConnect);
    this.deps.chairs.on('state', this.onChairState);
    this.deps.chairs.on('removed', this.onChairRemoved);
    this.newDay();
  }

  stop(): void {
    this.started = false;
    this.deps.source.off('stored', this.onStored);
    this.deps.broker.off('connect', this.onConnect);
    this.deps.chairs.off('state', this.onChairState);
    this.deps.chairs.off('removed', this.onChairRemoved);
    if (this.loading) clearImmediate(this.loading);
    this.loading = null;
    this.dayTimer?.cancel();
    this.publishTimer?.cancel();
    this.dayTimer = this.publishTimer = null;
  }

  /** Today's summary as it stands. */
  summary(): DaySummary & { currency?: string; capped?: true } {
    this.checkDay();
    const s = this.tally.summary();
    const { currency } = this.deps;
    return { ...s, ...(currency ? { currency } : {}), ...(this.capped ? { capped: true as const } : {}) };
  }

  /** "YYYY-MM-DD" today: the vendor's date when its clock is known, else this box's, in site.timezone. */
  private today(): string {
    const { vendorClock, clock, timeZone } = this.deps;
    const naive = vendorClock.now(clock.monotonic());
    return (naive === null ? formatVendorTime(clock.now(), timeZone) : formatNaive(naive)).slice(0, 10);
  }

  private checkDay(): void {
    if (this.started && this.today() !== this.tally.date) this.newDay();
  }

  /** A new day (or the first): an empty tally, filled from the store in slices, and a timer for midnight. */
  private newDay(): void {
    this.tally = new DayTally(this.today(), this.deps.timeZone);
    this.capped = false;
    this.scheduleDayCheck();
    if (this.loading) clearImmediate(this.loading);
    let fromSeq: number | null = null;
    let lastSeq = 0;
    const slice = (): void => {
      this.loading = null;
      try {
        if (fromSeq === null) {
          const first = this.deps.source.range({ from: this.deps.clock.now() - LOOK_BACK_MS }, 1)[0];
          if (!first) return this.publishSoon();
          fromSeq = first.seq;
          lastSeq = this.deps.source.lastSeq();
        }
        const toSeq = Math.min(lastSeq, fromSeq + SLICE - 1);
        this.count(this.deps.source.containing(this.tally.date, fromSeq, toSeq));
        // Records committed meanwhile come through `stored`; a use counted twice is counted once.
        if (toSeq >= lastSeq || this.capped) return this.publishSoon();
        fromSeq = toSeq + 1;
        this.loading = setImmediate(slice);
      } catch (err) {
        // The store reports its own failures (health); the summary counts what comes from now on.
        this.deps.logger.warn({ err: errorMessage(err) }, "cannot read today's transactions for the summary");
        this.publishSoon();
      }
    };
    this.loading = setImmediate(slice);
  }

  private scheduleDayCheck(): void {
    this.dayTimer?.cancel();
    const { vendorClock, clock, timeZone } = this.deps;
    const naive = vendorClock.now(clock.monotonic()) ?? parseNaive(formatVendorTime(clock.now(), timeZone)) ?? 0;
    const untilMidnight = DAY_MS - (naive % DAY_MS) + 1_000;
    this.dayTimer = clock.setTimeout(() => {
      this.dayTimer = null;
      if (this.today() !== this.tally.date) this.newDay();
      else this.scheduleDayCheck();
    }, Math.min(untilMidnight, LOOK_AGAIN_MS));
  }

  /** Counts today's records among these; true if the summary changed. */
  private count(records: readonly StoredRecord[]): boolean {
    const date = this.tally.date;
    let changed = false;
    for (const r of records) {
      // Most stored records are of other days: the date is looked for before the record is parsed.
      if (!r.record.includes(date)) continue;
      let fields: Record<string, unknown>;
      try {
        fields = JSON.parse(r.record) as Record<string, unknown>;
      } catch {
        continue;
      }
      const time = typeof fields['TransactionTime'] === 'string' ? parseNaive(fields['TransactionTime']) : null;
      if (time === null || formatNaive(time).slice(0, 10) !== date) continue;
      if (this.tally.size >= MAX_USES) {
        if (!this.capped) this.deps.logger.warn({ date, uses: MAX_USES }, "today's summary is capped: more uses than a site has");
        this.capped = true;
        break;
      }
      if (this.tally.add(r, fields)) changed = true;
    }
    return changed;
  }

  private publishSoon(): void {
    this.publishTimer ??= this.deps.clock.setTimeout(() => {
      this.publishTimer = null;
      this.publish();
    }, PUBLISH_GAP_MS);
  }

  private publish(): void {
    if (!this.deps.broker.connected) return;
    const s = this.summary();
    const whole = JSON.stringify(s);
    // Each chair's day has its own topic: the site's figures can go without them.
    const short = (): string => JSON.stringify(summaryWithoutChairs(s));
    if (whole !== this.lastPublished) {
      this.lastPublished = whole;
      const failed = (err: unknown): void => {
        this.lastPublished = '';
        this.deps.logger.debug({ err: errorMessage(err) }, 'summary not acknowledged; sent again at the next change or connect');
      };
      if (Buffer.byteLength(whole) > MAX_PAYLOAD_BYTES) {
        this.deps.broker.publish(this.deps.topic, short(), { qos: 1, retain: true }).catch(failed);
      } else {
        this.deps.sizeLimit.publishRetained(this.deps.topic, whole, () => this.shortForTheBroker(whole, short()), failed);
      }
    }
    this.publishChairs(s);
  }

  /** The short form, for the broker's limit: said once in the log. */
  private shortForTheBroker(whole: string, short: string): string {
    if (!this.toldOverBroker) {
      this.toldOverBroker = true;
      this.deps.logger.info({ bytes: Buffer.byteLength(whole), refusedAt: this.deps.sizeLimit.refusedAt() }, "today's summary is larger than the broker takes; it leaves its chairs out (each chair's day is on its own topic)");
    }
    return short;
  }

  /** Each known chair's day, where it changed. */
  private publishChairs(s: ReturnType<TodaySummary['summary']>): void {
    for (const id of this.deps.chairs.knownIds()) {
      const payload = JSON.stringify({
        deviceId: id,
        date: s.date,
        startedAt: s.startedAt,
        ...(s.chairs[id] ?? { uses: 0, minutes: 0, takings: {}, total: NO_TAKINGS }),
        ...(s.currency ? { currency: s.currency } : {}),
      });
      if (this.lastPublishedChairs.get(id) === payload) continue;
      this.lastPublishedChairs.set(id, payload);
      this.deps.broker.publish(this.deps.chairTopic(id), payload, { qos: 1, retain: true }).catch((err: unknown) => {
        if (this.lastPublishedChairs.get(id) === payload) this.lastPublishedChairs.delete(id);
        this.deps.logger.debug({ deviceId: id, err: errorMessage(err) }, "a chair's day not acknowledged; sent again at the next change or connect");
      });
    }
  }
}
