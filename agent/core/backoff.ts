/**
 * "Full jitter" exponential backoff: a uniformly random wait in [0, min(cap, base * 2^attempt)).
 * Spreads retries of many site boxes so they do not hammer the vendor in step.
 */
export function fullJitterDelay(attempt: number, baseMs: number, capMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.max(0, attempt));
  return Math.floor(random() * ceiling);
}

/** Retry-After as seconds or an HTTP date, in ms from now; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) return undefined;
  const trimmed = text.trim();
  // Seconds (any size: a value past 2^31 ms would overflow a timer, so callers bound it), or a date.
  if (/^\d{1,15}$/.test(trimmed)) return Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

/** How long an outage counts as a restart of the broker: it is met with the shortest waits. */
export const FAST_RECONNECT_WINDOW_MS = 30_000;

/**
 * The wait before reconnect attempt `attempt` (0-based) of an outage that began `outageMs` ago.
 * For the first 30 s: 50 ms doubling, at most 100 ms, so a restarted broker is met within about
 * 100 ms (a refused connection to a broker on the LAN costs next to nothing); after that it grows
 * to `capMs` (mqtt.reconnectSeconds), so a site whose broker is gone for hours tries a few times a
 * minute. Each wait is uniformly jittered in [d/2, d], so the boxes of a fleet behind one central
 * broker do not reconnect in step.
 */
export function reconnectDelay(attempt: number, outageMs: number, capMs: number, random: () => number = Math.random): number {
  const fast = outageMs < FAST_RECONNECT_WINDOW_MS;
  const cap = fast ? Math.min(100, capMs) : capMs;
  const d = Math.min(cap, (fast ? 50 : 500) * 2 ** Math.min(Math.max(0, attempt), 20));
  return Math.round(d / 2 + (random() * d) / 2);
}

/** A connection that ends this soon after the broker accepted it did not hold: a flap. */
export const FLAP_MS = 5_000;
/** A connection that held this long ends a run of flaps. */
export const STABLE_MS = 60_000;
/** Flaps in a row, with no reason given, after which the agent stops reconnecting at once. */
export const FLAPS_BEFORE_BACKOFF = 10;

/**
 * The wait before reconnecting after the `flaps`-th connection in a row that the broker ended at
 * once: 5 s doubling to 5 min, jittered in [d/2, d]. Two agents with one client id take the
 * session from each other at every connect; with the fast reconnect above they did so about 18
 * times a second, each logging it. Waiting longer at each takeover leaves one of them connected.
 */
export function flapDelay(flaps: number, random: () => number = Math.random): number {
  const d = Math.min(300_000, 5_000 * 2 ** Math.min(Math.max(0, flaps - 1), 10));
  return Math.round(d / 2 + (random() * d) / 2);
}

/**
 * The vendor's Retry-After, honoured but bounded: at most `capMs` (vendor.maxRetryAfterSeconds),
 * and never less than `floorMs` (the poll period). Absent: the floor.
 */
export function boundedRetryAfter(retryAfterMs: number | undefined, floorMs: number, capMs: number): number {
  if (retryAfterMs === undefined || !Number.isFinite(retryAfterMs)) return floorMs;
  return Math.max(floorMs, Math.min(retryAfterMs, capMs));
}
