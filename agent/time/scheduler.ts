import { nextInstant, wallMatcher } from './cron-next.js';
import { zoneOffsets } from './time-zone.js';
import type { Clock, Timer } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import { errorMessage } from '../platform/errors.js';

export interface ScheduledJob {
  stop(): void;
}

/** The port to cron-style scheduling; tests pass one they trigger by hand. */
export interface Scheduler {
  schedule(expression: string, name: string, task: () => Promise<unknown>): ScheduledJob;
}

/** A sleep longer than this is cut short to look at the wall clock again. */
const LOOK_AGAIN_MS = 60_000;
/** Two runs of one job are never closer than this, whatever the wall clock does. */
const MIN_GAP_MS = 1_000;
/** The wall clock behind the last match by more than this was set back (a timer only fires early by ms). */
const STEP_BACK_MS = 2_000;

/**
 * Cron expressions on a clock that jumps. The next match is read off the wall clock (cron is wall
 * time, in the site's zone), but the wait is a monotonic timer, cut at a minute to look again:
 * - a forward jump (NTP after a boot on a stale clock) runs the job once, not once per missed match
 *   (node-cron v4 warns for each: thousands of lines in a millisecond);
 * - a backward jump does not stall it for the length of the jump: the schedule follows the wall
 *   clock as it now reads (a sync period stays a period; the sync reads the vendor's clock anyway),
 *   and no match runs twice within a second;
 * - a run still under way when the next match comes is not overlapped.
 */
export function monotonicScheduler(timeZone: string, clock: Clock, logger: Logger): Scheduler {
  return {
    schedule(expression, name, task) {
      const matcher = wallMatcher(expression);
      const offsetAt = zoneOffsets(timeZone);
      if (!offsetAt) throw new Error(`unknown time zone ${timeZone}`);
      let timer: Timer | null = null;
      let stopped = false;
      let running = false;
      /** The wall time of the match last run (or planned), so it is never run twice. */
      let last = clock.now();
      let lastRunMono = -Infinity;

      const plan = (): void => {
        if (stopped) return;
        const now = clock.now();
        // Set back (NTP correcting a clock that ran ahead, an operator): what was last run lies in
        // this clock's future, and waiting for it would stall the job for the length of the step.
        if (now < last - STEP_BACK_MS) last = now;
        const next = nextInstant(matcher, Math.max(now, last), offsetAt);
        const wait = next - now;
        const full = wait <= LOOK_AGAIN_MS;
        timer = clock.setTimeout(() => {
          timer = null;
          // A full wait ran to its match (even if the wall clock moved back meanwhile); a cut one
          // runs only when the wall clock has reached the match (it moved forward).
          if (full || clock.now() >= next) fire(next);
          else plan();
        }, Math.max(0, Math.min(wait, LOOK_AGAIN_MS)));
      };

      const fire = (match: number): void => {
        last = Math.max(match, clock.now());
        const sinceLast = clock.monotonic() - lastRunMono;
        if (running || sinceLast < MIN_GAP_MS) {
          logger.debug({ job: name, running }, 'scheduled run skipped');
          plan();
          return;
        }
        running = true;
        lastRunMono = clock.monotonic();
        plan();
        task()
          .catch((err: unknown) => logger.error({ job: name, err: errorMessage(err) }, 'scheduled job failed'))
          .finally(() => {
            running = false;
          });
      };

      plan();
      return {
        stop() {
          stopped = true;
          timer?.cancel();
          timer = null;
        },
      };
    },
  };
}
