/**
 * Time as the components see it. Everything that waits goes through a Clock so tests can drive
 * time with a fake one instead of sleeping.
 */
export interface Timer {
  cancel(): void;
}

export interface Clock {
  /**
   * Milliseconds since the epoch: the wall clock, for timestamps people read. A Pi has no battery
   * clock: this jumps at boot when NTP sets it, so nothing that measures an interval uses it.
   */
  now(): number;
  /** Milliseconds on a clock that never jumps (since some arbitrary start): intervals, freshness, deadlines. */
  monotonic(): number;
  setTimeout(fn: () => void, ms: number): Timer;
  setInterval(fn: () => void, ms: number): Timer;
  /** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** Node turns a delay above 2^31-1 ms into 1 ms; nothing here waits longer than this anyway. */
export const MAX_TIMER_MS = 2 ** 31 - 1;
const timerDelay = (ms: number): number => (Number.isFinite(ms) ? Math.min(MAX_TIMER_MS, Math.max(0, ms)) : MAX_TIMER_MS);

export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  setTimeout(fn, ms) {
    const t = setTimeout(fn, timerDelay(ms));
    return { cancel: () => clearTimeout(t) };
  },
  setInterval(fn, ms) {
    const t = setInterval(fn, Math.max(1, timerDelay(ms)));
    return { cancel: () => clearInterval(t) };
  },
  sleep(ms, signal) {
    return sleepWith(this, ms, signal);
  },
};

export function sleepWith(clock: Pick<Clock, 'setTimeout'>, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      timer.cancel();
      reject(signal?.reason);
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Waits for `work` at most `ms`: true when it settled in time (fulfilled or rejected), false when
 * the time ran out. The timer is cancelled either way.
 */
export async function within(clock: Clock, work: Promise<unknown>, ms: number): Promise<boolean> {
  const timeUp = new AbortController();
  try {
    return await Promise.race([
      work.then(
        () => true,
        () => true,
      ),
      clock.sleep(ms, timeUp.signal).then(() => false),
    ]);
  } finally {
    timeUp.abort();
  }
}
