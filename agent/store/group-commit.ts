import type { Clock } from '../clock.js';
import type { TransactionRecord } from '../vendor/vendor-api.js';
import type { Annotate, Outbox, RecordSource } from './outbox.js';

interface Waiting {
  record: TransactionRecord;
  resolve: (isNew: boolean) => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit for records that arrive one per request (the webhook). Records added in the same
 * turn of the event loop (while the previous commit's fsync held it, concurrent requests queue
 * up) are committed together, once, and each caller is answered only after that commit is on
 * disk: the same durability as one commit per record, for a fraction of the fsyncs. A batch that
 * fails is retried one record at a time, so one record can never fail the others.
 */
export class GroupCommit {
  private queue: Waiting[] = [];
  private scheduled: NodeJS.Immediate | null = null;

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
      if (this.queue.length >= this.maxBatch) this.flush();
      else this.scheduled ??= setImmediate(() => this.flush());
    });
  }

  /** Commits what is queued now (also called when stopping, so nobody waits on a timer). */
  flush(): void {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = null;
    const batch = this.queue;
    this.queue = [];
    if (batch.length === 0) return;
    const now = this.clock.now();
    try {
      const flags = this.outbox.insertEach(
        batch.map((w) => w.record),
        this.source,
        now,
        undefined,
        this.annotate,
      );
      batch.forEach((w, i) => w.resolve(flags[i] === true));
    } catch (err) {
      if (batch.length === 1) return (batch[0] as Waiting).reject(err);
      for (const w of batch) {
        try {
          w.resolve(this.outbox.insertEach([w.record], this.source, now, undefined, this.annotate)[0] === true);
        } catch (e) {
          w.reject(e);
        }
      }
    }
  }
}
