import type { Clock } from '../platform/clock.js';
import type { VendorClock } from '../time/vendor-clock.js';
import { formatIsoWithOffset, parseNaive } from '../time/vendor-time.js';
import type { TransactionRecord } from '../vendor/vendor-api.js';
import type { Component } from '../platform/component.js';
import type { StartOutcome, StartRequest, StartService } from './start-service.js';

/** How long after a run's planned end its records may still arrive (the list is synced every 30 s by default). */
export const CORRELATION_GRACE_MS = 5 * 60_000;
/**
 * How far before the start (by the vendor's clock as the agent reckons it from ServerTime, to the
 * second) a record of the run may be stamped: the clock's reading error, not an earlier run.
 */
const CLOCK_SLACK_MS = 5_000;
/** Runs remembered per chair: a late record of an earlier run still finds its own start. */
const RUNS_KEPT = 4;

interface Run {
  note: string;
  /** Vendor wall time of the start (naive ms), when the vendor's clock is known. */
  vendorAt: number | null;
  /** Vendor wall time the run ends (start plus its minutes). */
  vendorEnd: number | null;
  /** Monotonic time after which the run's records can no longer arrive. */
  until: number;
}

/**
 * POS correlation, right or silent: the vendor's control answer carries no id, so a start made
 * with a `transaction` is remembered per chair, and a record of that chair carries
 * `agent.startRequest` {transaction, source, at} only when the vendor stamped it inside that
 * run: from the start (less a few seconds of clock error) to the start plus its minutes. A sale
 * after the run ended is not the POS's; a record without a time, or before the vendor's clock is
 * known, is not tagged. The last four runs of a chair are kept, so a record that arrives late is
 * tied to its own start and never to a later one. Kept in memory: a restart forgets them.
 */
export class StartCorrelation {
  private readonly byChair = new Map<string, Run[]>();

  constructor(
    private readonly clock: Clock,
    private readonly vendorClock: VendorClock,
    private readonly timeZone: string,
  ) {}

  /** A start about to be made (the vendor may report its record before the start is confirmed); only one with a transaction is remembered. */
  starting(deviceId: string, minutes: number, request: StartRequest): void {
    if (request.transaction === undefined) return;
    const mono = this.clock.monotonic();
    const note = JSON.stringify({ transaction: request.transaction, source: request.source, at: formatIsoWithOffset(this.clock.now(), this.timeZone) });
    const vendorAt = this.vendorClock.now(mono);
    const run: Run = { note, vendorAt, vendorEnd: vendorAt === null ? null : vendorAt + minutes * 60_000, until: mono + minutes * 60_000 + CORRELATION_GRACE_MS };
    this.byChair.set(deviceId, [run, ...(this.byChair.get(deviceId) ?? [])].slice(0, RUNS_KEPT));
  }

  /** A start that did not happen: its records, if any, are not this request's. */
  failed(deviceId: string): void {
    const runs = this.byChair.get(deviceId);
    runs?.shift();
    if (runs?.length === 0) this.byChair.delete(deviceId);
  }

  /** The startRequest (JSON text) a record arriving now belongs to, or null. */
  annotate(record: TransactionRecord): string | null {
    const now = this.clock.monotonic();
    const runs = this.byChair.get(record.deviceId)?.filter((r) => r.until >= now);
    if (!runs || runs.length === 0) {
      this.byChair.delete(record.deviceId);
      return null;
    }
    this.byChair.set(record.deviceId, runs);
    const stamped = record.transactionTime === null ? null : parseNaive(record.transactionTime);
    if (stamped === null) return null;
    const run = runs.find((r) => r.vendorAt !== null && r.vendorEnd !== null && stamped >= r.vendorAt - CLOCK_SLACK_MS && stamped <= r.vendorEnd);
    return run?.note ?? null;
  }
}

/**
 * Feeds the starts the start service makes into the correlation. Only a start the vendor refused
 * or never got is forgotten: a refusal by the rules (busy...) is not the remembered start, and one
 * whose fate is unknown (not_confirmed) may have run.
 */
export class StartCorrelationFeed implements Component {
  readonly name = 'start-correlation';

  constructor(
    private readonly correlation: StartCorrelation,
    private readonly starts: StartService,
  ) {}

  private readonly onStarting = (deviceId: string, minutes: number, request: StartRequest): void => this.correlation.starting(deviceId, minutes, request);

  private readonly onFinished = (outcome: StartOutcome): void => {
    if (!outcome.ok && outcome.error.startsWith('vendor_')) this.correlation.failed(outcome.deviceId);
  };

  start(): void {
    this.starts.on('starting', this.onStarting);
    this.starts.on('finished', this.onFinished);
  }

  stop(): void {
    this.starts.off('starting', this.onStarting);
    this.starts.off('finished', this.onFinished);
  }
}
