import type { StoreDatabase } from './database.js';
import { PARKED_COLUMNS, type ParkedRecord } from './records.js';

/** Parked records are retried 1 h after they were parked, then 2, 4, 8, 16 and at most every 24 h. */
export function parkRetryDelayMs(parkCount: number): number {
  return Math.min(24 * 3_600_000, 3_600_000 * 2 ** Math.max(0, parkCount - 1));
}


/**
 * The parking policy: a record the broker refuses (or that drops the connection each time it is
 * sent) is set aside, still waiting and counted, and retried on a growing schedule, so the rest
 * flows. Parks and unparks are writes on the writer (they never hold the event loop).
 */
export class Parking {
  constructor(
    private readonly db: StoreDatabase,
    private readonly onUnparked: (count: number) => void,
  ) {}

  /** Sets a record aside; resolves to when it will be retried (null: it was delivered or parked already). */
  async park(seq: number, reason: string, now: number): Promise<number | null> {
    const count = this.db.read('reading a record', () => this.db.statement<[number], number>('SELECT park_count FROM transactions WHERE seq = ?').pluck().get(seq) ?? 0);
    const retryAt = now + parkRetryDelayMs(count + 1);
    const { parked } = await this.db.write('parking a record', { op: 'park', seq, reason, now, retryAt });
    if (!parked) return null;
    this.db.changed();
    return retryAt;
  }

  /** Parked records whose retry time has come go back to waiting; resolves to how many. */
  unparkDue(now: number): Promise<number> {
    return this.unpark(now, false);
  }

  /** Makes every parked record due now (an operator's "try them again"); resolves to how many. */
  retryAllNow(now: number): Promise<number> {
    return this.unpark(now, true);
  }

  private async unpark(now: number, all: boolean): Promise<number> {
    // The periodic check on a box with nothing parked (nearly always) wakes no writer.
    const next = this.nextRetry();
    if (next === null || (!all && next > now)) return 0;
    const { unparked } = await this.db.write('retrying parked records', { op: 'unpark', now, all });
    if (unparked > 0) {
      this.db.changed();
      this.onUnparked(unparked);
    }
    return unparked;
  }

  /** When the next parked record is due, or null when none is parked. */
  nextRetry(): number | null {
    return this.db.read(
      'reading parked records',
      () => this.db.statement<[], number | null>('SELECT MIN(retry_at) FROM transactions WHERE delivered_at IS NULL AND parked_at IS NOT NULL').pluck().get() ?? null,
    );
  }

  list(limit = 100): ParkedRecord[] {
    return this.db.read(
      'reading parked records',
      () => this.db.statement<[number], ParkedRecord>(`SELECT ${PARKED_COLUMNS} FROM transactions WHERE delivered_at IS NULL AND parked_at IS NOT NULL ORDER BY seq LIMIT ?`).all(limit),
    );
  }
}
