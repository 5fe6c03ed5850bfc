import type { Clock, Timer } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import { errorMessage } from '../platform/errors.js';
import type { Outbox } from '../store/outbox.js';

/** Marked at once from this many acknowledged records. */
const BATCH = 2000;
/** A failed mark is tried again after this long. */
const RETRY_MS = 5_000;

export interface AckBatcherOptions {
  outbox: Outbox;
  clock: Clock;
  logger: Logger;
  /** Acknowledged records are marked delivered in batches at most this often. */
  intervalMs: number;
  /** A batch was marked delivered. */
  onMarked: (count: number) => void;
}

/**
 * Records whose PUBACK came, marked delivered in the outbox in batches: one write per batch, not
 * per record, and one batch at a time (acknowledgements that come meanwhile wait for the next).
 * Until a record is known to be marked it counts as handled, so it is not sent again.
 */
export class AckBatcher {
  /** Acknowledged but not yet marked. */
  private acked = new Set<number>();
  /** Being marked; settled when `marked` is null. */
  private marking: ReadonlySet<number> = new Set<number>();
  private marked: Promise<void> | null = null;
  private timer: Timer | null = null;
  /** Stopping: every acknowledgement is marked at once (the database closes after the broker). */
  private closing = false;
  /** Why marks fail, while they do: said once, not at every retry (a read-only card fails them for days). */
  private failing: string | null = null;

  constructor(private readonly opts: AckBatcherOptions) {}

  has(seq: number): boolean {
    return this.acked.has(seq) || this.marking.has(seq);
  }

  add(seq: number): void {
    this.acked.add(seq);
    this.schedule();
  }

  /** From now on mark at once; resolves once everything acknowledged so far is marked (or failed). */
  async close(): Promise<void> {
    this.closing = true;
    this.flush();
    // Each mark that settles while closing starts the next, for the PUBACKs that came meanwhile.
    while (this.marked) await this.marked;
  }

  /** Marking at once from now on, without waiting (acknowledgements still on their way). */
  markAtOnce(): void {
    this.closing = true;
  }

  /** Marks what was acknowledged now (a retry after the broker came back). */
  flush(): void {
    this.timer?.cancel();
    this.timer = null;
    if (this.acked.size === 0 || this.marked) return;
    const batch = this.acked;
    this.acked = new Set();
    this.marking = batch;
    this.marked = this.opts.outbox.markDelivered([...batch], this.opts.clock.now()).then(
      () => {
        if (this.failing !== null) this.opts.logger.info({ records: batch.size }, 'delivered records marked again');
        this.failing = null;
        this.opts.onMarked(batch.size);
        this.settled(false);
      },
      (err: unknown) => {
        // Kept in memory and tried again; if the agent dies first they are simply sent again.
        for (const seq of batch) this.acked.add(seq);
        const why = errorMessage(err);
        if (why !== this.failing) this.opts.logger.error({ err: why, records: batch.size }, `cannot mark delivered records; retried every ${RETRY_MS / 1000} s, logged again when that changes`);
        this.failing = why;
        this.settled(true);
      },
    );
  }

  private settled(failed: boolean): void {
    this.marking = new Set<number>();
    this.marked = null;
    if (this.acked.size === 0) return;
    if (failed) {
      if (!this.closing) this.timer = this.opts.clock.setTimeout(() => this.flush(), RETRY_MS);
    } else this.schedule();
  }

  private schedule(): void {
    if (this.acked.size >= BATCH || this.closing) this.flush();
    else this.timer ??= this.opts.clock.setTimeout(() => this.flush(), this.opts.intervalMs);
  }
}
