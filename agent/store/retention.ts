import type { Clock, Timer } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import type { Scheduler, ScheduledJob } from '../time/scheduler.js';
import { errorMessage } from '../platform/errors.js';
import type { Outbox } from './outbox.js';
import type { Component } from '../platform/component.js';

/** Rows deleted per transaction: a few milliseconds each, so the event loop is never held. */
export const PRUNE_BATCH = 2_000;

export interface RetentionDeps {
  outbox: Outbox;
  scheduler: Scheduler;
  clock: Clock;
  logger: Logger;
  retentionDays: number;
  /** Daily, at a quiet hour of the site. */
  schedule?: string;
  /** The first prune after start waits this long, off the start path. */
  firstDelayMs?: number;
}

/**
 * Prunes delivered records older than the retention period, daily and once shortly after start,
 * in batches of PRUNE_BATCH rows with the event loop free between them: a million expired records
 * delay neither the first chair state nor a button press. Undelivered records are never pruned.
 */
export class Retention implements Component {
  readonly name = 'retention';
  private job: ScheduledJob | null = null;
  private first: Timer | null = null;
  private running: Promise<number> | null = null;
  private stopped = true;

  constructor(private readonly deps: RetentionDeps) {}

  start(): void {
    this.stopped = false;
    // The daily schedule is set up with the first pass, also off the start path.
    this.first = this.deps.clock.setTimeout(() => {
      this.first = null;
      this.job = this.deps.scheduler.schedule(this.deps.schedule ?? '17 3 * * *', 'retention', () => this.prune());
      void this.prune();
    }, this.deps.firstDelayMs ?? 30_000);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.first?.cancel();
    this.first = null;
    this.job?.stop();
    this.job = null;
    await this.running;
  }

  /** One pruning pass; joins the one under way. Resolves to how many records it deleted. */
  prune(): Promise<number> {
    this.running ??= this.pass().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async pass(): Promise<number> {
    const before = this.deps.clock.now() - this.deps.retentionDays * 86_400_000;
    let total = 0;
    try {
      for (;;) {
        if (this.stopped) break;
        const n = await this.deps.outbox.pruneDelivered(before, PRUNE_BATCH);
        total += n;
        if (n < PRUNE_BATCH) break;
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    } catch (err) {
      this.deps.logger.error({ err: errorMessage(err), pruned: total }, 'pruning failed');
    }
    if (total > 0) this.deps.logger.info({ pruned: total, retentionDays: this.deps.retentionDays }, 'pruned delivered transactions');
    return total;
  }
}
