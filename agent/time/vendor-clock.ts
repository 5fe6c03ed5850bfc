import { naiveToInstant, parseNaive } from './vendor-time.js';

/** Within this, the box's clock and the vendor's agree (ServerTime has one-second steps, and a poll takes a while). */
export const CLOCK_TOLERANCE_MS = 120_000;

export interface ClockReport {
  ok: boolean;
  detail: string;
  /** This box's clock minus the vendor's, ms (ServerTime read in site.timezone). */
  skewMs: number;
}

function duration(ms: number): string {
  const s = Math.round(Math.abs(ms) / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (h > 0) return `${h} h ${String(m).padStart(2, '0')} min`;
  if (m > 0) return `${m} min ${s % 60} s`;
  return `${s} s`;
}

/**
 * The vendor's wall clock, as its last ServerTime said, carried forward on the monotonic clock.
 * A Pi boots on a stale time and NTP then jumps it; the vendor's clock is the one its records are
 * stamped with, so the transaction sync asks for windows in vendor time, from this.
 */
export class VendorClock {
  private naiveAt: number | null = null;
  private monoAt = 0;

  /** A ServerTime from an answer that left the vendor between `monoSent` and `monoReceived`. */
  observe(serverTime: string, monoSent: number, monoReceived: number): boolean {
    const naive = parseNaive(serverTime);
    if (naive === null) return false;
    this.naiveAt = naive;
    // The vendor wrote it somewhere in between; its seconds are truncated, so add half of one.
    this.monoAt = (monoSent + monoReceived) / 2 - 500;
    return true;
  }

  get known(): boolean {
    return this.naiveAt !== null;
  }

  /** The vendor's wall time now (naive ms), or null before any ServerTime was seen. */
  now(mono: number): number | null {
    return this.naiveAt === null ? null : this.naiveAt + (mono - this.monoAt);
  }

  /**
   * Whether this box's clock agrees with the vendor's, reading ServerTime in the site's zone. A
   * difference of whole quarter hours is a zone that is not the vendor's (or a clock off by whole
   * hours); anything else is this clock being wrong.
   */
  compare(agentNow: number, mono: number, timeZone: string): ClockReport | null {
    const naive = this.now(mono);
    if (naive === null) return null;
    const skewMs = agentNow - naiveToInstant(naive, timeZone);
    const abs = Math.abs(skewMs);
    if (abs <= CLOCK_TOLERANCE_MS) return { ok: true, detail: `within ${duration(skewMs)} of the vendor's ServerTime`, skewMs };
    const quarters = Math.round(skewMs / 900_000);
    const direction = skewMs > 0 ? 'ahead of' : 'behind';
    if (quarters !== 0 && Math.abs(skewMs - quarters * 900_000) <= CLOCK_TOLERANCE_MS) {
      return {
        ok: false,
        detail: `the vendor's ServerTime, read in ${timeZone}, is ${duration(quarters * 900_000)} ${skewMs > 0 ? 'behind' : 'ahead of'} this clock: the vendor probably speaks another zone than site.timezone (or this clock is off by whole hours); the transaction sync follows the vendor's clock either way`,
        skewMs,
      };
    }
    return {
      ok: false,
      detail: `this clock is ${duration(skewMs)} ${direction} the vendor's ServerTime (${timeZone}): check time sync (timedatectl); the transaction sync follows the vendor's clock meanwhile`,
      skewMs,
    };
  }
}
