/**
 * The indicator patterns of the interface, as functions of time since the pattern began.
 * Pure logic: the LED controller asks "on or off now?" and "when does that change next?".
 */
export type LedPattern = 'off' | 'on' | 'fast' | 'slow' | 'flash' | 'burst';

const FAST_HALF_MS = 100; // 5 Hz: start requested, waiting for the vendor
const SLOW_HALF_MS = 500; // 1 Hz: running
export const FLASH_COUNT = 4;
const FLASH_HALF_MS = 75; // a few quick flashes: the start failed
export const FLASH_TOTAL_MS = FLASH_COUNT * 2 * FLASH_HALF_MS;
const BURST_PERIOD_MS = 2000; // a burst of quick flashes every 2 s: some GPIO lines cannot be used

export function ledLevel(pattern: LedPattern, elapsedMs: number): boolean {
  switch (pattern) {
    case 'off':
      return false;
    case 'on':
      return true;
    case 'fast':
      return Math.floor(elapsedMs / FAST_HALF_MS) % 2 === 0;
    case 'slow':
      return Math.floor(elapsedMs / SLOW_HALF_MS) % 2 === 0;
    case 'flash':
      return elapsedMs < FLASH_TOTAL_MS && Math.floor(elapsedMs / FLASH_HALF_MS) % 2 === 0;
    case 'burst': {
      const t = elapsedMs % BURST_PERIOD_MS;
      return t < FLASH_TOTAL_MS && Math.floor(t / FLASH_HALF_MS) % 2 === 0;
    }
  }
}

/** Milliseconds until the level may change, or null when it never will. */
export function nextLedChange(pattern: LedPattern, elapsedMs: number): number | null {
  const toNextHalf = (half: number): number => half - (elapsedMs % half);
  switch (pattern) {
    case 'off':
    case 'on':
      return null;
    case 'fast':
      return toNextHalf(FAST_HALF_MS);
    case 'slow':
      return toNextHalf(SLOW_HALF_MS);
    case 'flash':
      return elapsedMs < FLASH_TOTAL_MS ? toNextHalf(FLASH_HALF_MS) : null;
    case 'burst': {
      const t = elapsedMs % BURST_PERIOD_MS;
      return t < FLASH_TOTAL_MS ? toNextHalf(FLASH_HALF_MS) : BURST_PERIOD_MS - t;
    }
  }
}

export interface ChairLedInput {
  /** The chair is in a fresh list. */
  online: boolean;
  running: boolean;
  startable: boolean;
  /** A start is in flight. */
  starting: boolean;
}

/** What a chair's LED shows, before any failure flashes are laid over it. */
export function chairLedPattern(c: ChairLedInput | null): LedPattern {
  if (!c) return 'off';
  if (c.starting) return 'fast';
  if (!c.online) return 'off';
  if (c.running) return 'slow';
  return c.startable ? 'on' : 'off';
}

/**
 * The agent's own LED: steady when all is well; fast blink no vendor (no chair can start);
 * a burst of quick flashes every 2 s when some button or LED line cannot be used (a dead button
 * must not go unnoticed); slow blink while the broker is away (buffering).
 */
export function statusLedPattern(vendorOk: boolean, brokerOk: boolean, gpioOk = true): LedPattern {
  if (!vendorOk) return 'fast';
  if (!gpioOk) return 'burst';
  if (!brokerOk) return 'slow';
  return 'on';
}
