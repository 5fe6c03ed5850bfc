import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { Scheduler, ScheduledJob } from '../scheduler.js';
import { errorMessage } from '../errors.js';
import type { Outbox } from '../store/outbox.js';
import type { Component } from './component.js';

export interface RetentionDeps {
  outbox: Outbox;
  scheduler: Scheduler;
  clock: Clock;
  logger: Logger;
  retentionDays: number;
  /** Daily, at a quiet hour of the site. */
  schedule?: string;
}

/** Prunes delivered records older than the retention period, daily and once at start. */
export class Retention implements Component {
  readonly name = 'retention';
  private job: ScheduledJob | null = null;

  constructor(private readonly deps: RetentionDeps) {}

  start(): void {
    this.job = this.deps.scheduler.schedule(this.deps.schedule ?? '17 3 * * *', 'retention', async () => this.prune());
    this.prune();
  }

  stop(): void {
    this.job?.stop();
    this.job = null;
  }

  prune(): number {
    const before = this.deps.clock.now() - this.deps.retentionDays * 86_400_000;
    try {
      const n = this.deps.outbox.prune(before);
      if (n > 0) this.deps.logger.info({ pruned: n, retentionDays: this.deps.retentionDays }, 'pruned delivered transactions');
      return n;
    } catch (err) {
      this.deps.logger.error({ err: errorMessage(err) }, 'pruning failed');
      return 0;
    }
  }
}
