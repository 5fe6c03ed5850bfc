import type { Outbox, StoredRecord } from '../store/outbox.js';

/**
 * Waiting records read from the outbox at a time: a few windows' worth, not a flush's worth. A
 * batch is read at once and handed out at the flush's pace, and its rows live until then: 500 of
 * them took about 18 ms to hand out, long enough for V8's young-generation collections to find
 * many of them alive and move them to the old generation. 50 are handed out in under 2 ms; a
 * 10,000-record flush costs about 5% less CPU than with 500, a 100,000-record one more
 * (docs/ARCHITECTURE.md, "CPU of a flush after an outage").
 */
const READ_BATCH = 50;
/** Records taken as they are committed that the cursor holds before it reads them back instead. */
const HOLD = 500;

/**
 * A cursor over the outbox's waiting records, oldest first, read in batches rather than per
 * record. New records as committed are appended when the cursor has caught up, so a record that
 * arrives while the broker is there is never read back. Bounded: while the broker is away the
 * outbox, not memory, holds the backlog.
 */
export class ReadAhead {
  private queue: StoredRecord[] = [];
  private at = 0;
  /** Highest seq read from the database since the last rescan. */
  private lastRead = 0;
  /** The last read reached the end of the outbox: what is stored next can be taken as it comes. */
  private atEnd = false;
  /**
   * The outbox's change count when it was last read, or when all that changed since was handed
   * over: while it stands and the last read reached the end, there is nothing new to read (no
   * query per PUBACK while records come one by one). Any other write makes the next read look.
   */
  private seen = -1;

  constructor(
    private readonly outbox: Outbox,
    /** Records in flight or acknowledged: a record stored again under them is not a reason to rescan. */
    private readonly handled: (seq: number) => boolean,
    private readonly batch = READ_BATCH,
    private readonly hold = HOLD,
  ) {}

  /** The next waiting record, or undefined when none is left. Throws the outbox's StoreError. */
  next(): StoredRecord | undefined {
    if (this.at >= this.queue.length) {
      if (this.atEnd && this.seen === this.outbox.changeCount) return undefined;
      this.seen = this.outbox.changeCount;
      this.queue = this.outbox.pending(this.lastRead, this.batch);
      this.at = 0;
      this.atEnd = this.queue.length < this.batch;
      const last = this.queue[this.queue.length - 1];
      if (!last) return undefined;
      this.lastRead = last.seq;
    }
    return this.queue[this.at++];
  }

  /** Read again from the oldest waiting record (the caller skips what it has handled). */
  rescan(): void {
    this.queue = [];
    this.at = 0;
    this.lastRead = 0;
    this.atEnd = false;
  }

  /** Records a commit added, as stored. */
  readonly take = (records: readonly StoredRecord[]): void => {
    const first = records[0];
    const last = records[records.length - 1];
    if (!first || !last) return;
    // Commits can be reported out of seq order: records older than what was read are found by
    // reading again from the start.
    if (first.seq <= this.lastRead) {
      if (!this.handled(first.seq)) this.rescan();
      return;
    }
    if (!this.atEnd) return;
    if (this.queue.length - this.at + records.length > this.hold) {
      this.atEnd = false;
      return;
    }
    this.queue = this.queue.slice(this.at).concat(records);
    this.at = 0;
    this.lastRead = last.seq;
    // This commit is the one change since the last look: the queue holds all there is.
    const now = this.outbox.changeCount;
    if (this.seen === now - 1) this.seen = now;
  };
}
