/**
 * Waits until `check` returns a truthy value, re-checking on a short interval. For conditions
 * that have no event to await (a file, another process's state); never a fixed sleep. The
 * deadline is on the monotonic clock: a CI machine's wall clock can step, and a step ahead would
 * end a wait early.
 */
export async function waitFor<T>(check: () => T | Promise<T>, what: string | (() => string), timeoutMs = 15_000): Promise<NonNullable<T>> {
  const deadline = performance.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === "function" ? what() : what}${last ? ` (last error: ${String(last)})` : ''}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Resolves with the event's arguments the first time `predicate` accepts them. */
export function nextEvent<A extends unknown[]>(
  emitter: { on(e: string, f: (...a: A) => void): unknown; off(e: string, f: (...a: A) => void): unknown },
  event: string,
  predicate: (...args: A) => boolean = () => true,
  timeoutMs = 15_000,
): Promise<A> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      emitter.off(event, handler);
      reject(new Error(`timed out waiting for event ${event}`));
    }, timeoutMs);
    const handler = (...args: A): void => {
      if (!predicate(...args)) return;
      clearTimeout(t);
      emitter.off(event, handler);
      resolve(args);
    };
    emitter.on(event, handler);
  });
}
