import type { Clock } from '../clock.js';
import type { VendorClock } from '../core/vendor-clock.js';
import { formatIsoWithOffset, parseNaive } from '../core/vendor-time.js';
import type { TransactionRecord } from '../vendor/vendor-api.js';
import type { StartRequest } from './start-service.js';

/** How long after a run's planned end its records may still arrive (the list is synced every 30 s by default). */
export const CORRELATION_GRACE_MS = 5 * 60_000;
/** A record stamped this much before the start (vendor time) belongs to an earlier run. */
const EARLIER_RUN_MS = 60_000;

interface Remembered {
  note: string;
  /** Vendor wall time of the start (naive ms), when the vendor's clock is known. */
  vendorAt: number | null;
  until: number;
}

/**
 * POS correlation, best effort: the vendor's control answer carries no id, so a start made with
 * a `transaction` is remembered per chair, and the chair's transaction records that the agent
 * receives while that run lasts (its minutes plus 5 minutes for the records to arrive), and that
 * the vendor stamped no earlier than the start, carry `agent.startRequest`
 * {transaction, source, at}. A later start of the same chair replaces it. Kept in memory: a
 * restart forgets it.
 */
export class StartCorrelation {
  private readonly byChair = new Map<string, Remembered>();

  constructor(
    private readonly clock: Clock,
    private readonly vendorClock: VendorClock,
    private readonly timeZone: string,
  ) {}

  /** A start about to be made (the vendor may report its record before the start is confirmed); only one with a transaction is remembered. */
  starting(deviceId: string, minutes: number, request: StartRequest): void {
    if (request.transaction === undefined) {
      this.byChair.delete(deviceId);
      return;
    }
    const mono = this.clock.monotonic();
    const note = JSON.stringify({ transaction: request.transaction, source: request.source, at: formatIsoWithOffset(this.clock.now(), this.timeZone) });
    this.byChair.set(deviceId, { note, vendorAt: this.vendorClock.now(mono), until: mono + minutes * 60_000 + CORRELATION_GRACE_MS });
  }

  /** A start that did not happen: its records, if any, are not this request's. */
  failed(deviceId: string): void {
    this.byChair.delete(deviceId);
  }

  /** The startRequest (JSON text) a record arriving now belongs to, or null. */
  annotate(record: TransactionRecord): string | null {
    const r = this.byChair.get(record.deviceId);
    if (!r) return null;
    if (this.clock.monotonic() > r.until) {
      this.byChair.delete(record.deviceId);
      return null;
    }
    const stamped = record.transactionTime === null ? null : parseNaive(record.transactionTime);
    if (stamped !== null && r.vendorAt !== null && stamped < r.vendorAt - EARLIER_RUN_MS) return null;
    return r.note;
  }
}
