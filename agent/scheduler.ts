import cron from 'node-cron';
import type { Logger } from './logger.js';
import { errorMessage } from './errors.js';

export interface ScheduledJob {
  stop(): void;
}

/** The port to cron-style scheduling; tests pass one they trigger by hand. */
export interface Scheduler {
  schedule(expression: string, name: string, task: () => Promise<unknown>): ScheduledJob;
}

/** node-cron v4: sleeps until the next match, never runs a job over itself. */
export function cronScheduler(timeZone: string, logger: Logger): Scheduler {
  const cronLogger = {
    info: (m: string) => logger.debug(m),
    warn: (m: string) => logger.warn(m),
    error: (m: string | Error, e?: Error) => logger.error({ err: errorMessage(e ?? m) }, 'scheduled job failed'),
    debug: (m: string | Error) => logger.debug(errorMessage(m)),
  };
  return {
    schedule(expression, name, task) {
      const job = cron.schedule(expression, () => task(), { name, timezone: timeZone, noOverlap: true, logger: cronLogger });
      return { stop: () => void job.destroy() };
    },
  };
}
