import type { Clock } from '../platform/clock.js';
import type { TransactionRecord } from '../vendor/vendor-api.js';
import type { Annotate, Outbox, RecordSource } from './outbox.js';

interface Waiting {
  record: TransactionRecord;
  resolve: (isNew: boolean) => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit for records that arrive one per request (the webhook). Records that arrive while
 * the previous commit is on its way to disk (on the store's worker thread, or holding the event
 * loop where there is none) are committed together, once, and each caller is answered only after
 * that commit is on disk: the same durability as one commit per record, for a fraction of the
 * fsyncs. A batch that fails is retried one record at a time, so one record can never fail the
 * others.
 */
export class GroupCommit {
  private queue: Waiting[] = [];
  private scheduled: NodeJS.Immediate | null = null;
  /** The batch being committed, if any: the next one waits for it (that is where batches grow). */
  private running: Promise<void> | null = null;

  constructor(
    private readonly outbox: Outbox,
    private readonly source: RecordSource,
    private readonly clock: Clock,
    private readonly annotate?: Annotate,
    private readonly maxBatch = 256,
  ) {}

  /** Resolves once the record is committed: true if it was new, false if already stored. */
  add(record: TransactionRecord): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.queue.push({ record, resolve, reject });
      if (!this.running) this.scheduled ??= setImmediate(() => this.next());
    });
  }

  /** Commits what is queued, batch after batch, until nothing waits (also when stopping). */
  async drain(): Promise<void> {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = null;
    while (this.running || this.queue.length > 0) {
      if (this.running) await this.running;
      else this.next();
    }
  }

  private next(): void {
    this.scheduled = null;
    if (this.running || this.queue.length === 0) return;
    const batch = this.queue.splice(0, this.maxBatch);
    this.running = this.commit(batch).finally(() => {
      this.running = null;
      if (this.queue.length > 0) this.next();
    });
  }

  private async commit(batch: Waiting[]): Promise<void> {
    const now = this.clock.now();
    try {
      const flags = await this.outbox.storeDurably(
        batch.map((w) => w.record),
        this.source,
        now,
        this.annotate,
      );
      batch.forEach((w, i) => w.resolve(flags[i] === true));
    } catch (err) {
      if (batch.length === 1) return (batch[0] as Waiting).reject(err);
      for (const w of batch) {
        try {
          w.resolve((await this.outbox.storeDurably([w.record], this.source, now, this.annotate))[0] === true);
        } catch (e) {
          w.reject(e);
        }
      }
    }
  }
}
