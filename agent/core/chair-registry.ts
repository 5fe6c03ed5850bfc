import { EventEmitter } from 'node:events';
import type { ChairReading } from '../vendor/vendor-api.js';
import { chairStateFrom, sameChairState, sameReading, type ChairState, type StateOptions } from './chair-state.js';

export interface ChairView {
  deviceId: string;
  state: ChairState | null;
  /** In the latest successful list, and that list is fresh. */
  online: boolean;
}

export interface RegistryEvents {
  state: [ChairState];
  availability: [deviceId: string, online: boolean];
  /** A successful chair list was applied (every chair in it read afresh). */
  listed: [];
  /** A chair the site does not expect was missing from every successful list for forgetAfterMs: it is gone. */
  removed: [deviceId: string];
}

export interface RegistryOptions extends StateOptions {
  /** A list older than this is stale: every chair goes offline. */
  staleAfterMs: number;
  /** Chairs the site expects (buttons, LEDs) even before the vendor lists them. They are never forgotten. */
  expected: readonly string[];
  /**
   * A chair missing from every successful list for this long is forgotten (a chair moved to
   * another site or retired). Only successful lists count: an unreachable vendor forgets nothing.
   */
  forgetAfterMs: number;
}

/**
 * The agent's picture of the chairs: latest state per chair, whether each was in the latest
 * successful list, and whether that list is still fresh. Emits only on change. Times given to it
 * are monotonic milliseconds: a wall clock set back would keep a failing list "fresh".
 */
export class ChairRegistry extends EventEmitter<RegistryEvents> {
  private readonly states = new Map<string, ChairState>();
  /** The vendor's latest reading per chair, as given. */
  private readonly readings = new Map<string, ChairReading>();
  /** Chairs whose state holds an older ServerTime than their latest reading (converted when read). */
  private readonly staleServerTime = new Set<string>();
  private readonly listed = new Set<string>();
  private readonly online = new Map<string, boolean>();
  /** When each chair was last in a successful list (or, for one never listed, first known to a list). */
  private readonly lastListedAt = new Map<string, number>();
  private readonly expected: ReadonlySet<string>;
  private lastSuccessAt: number | null = null;

  constructor(private readonly opts: RegistryOptions) {
    super();
    this.expected = new Set(opts.expected);
    for (const id of opts.expected) this.online.set(id, false);
  }

  /** A successful list at `now`. */
  applyList(readings: readonly ChairReading[], now: number): void {
    this.lastSuccessAt = now;
    this.listed.clear();
    for (const reading of readings) {
      this.listed.add(reading.deviceId);
      this.lastListedAt.set(reading.deviceId, now);
      this.apply(reading);
    }
    this.refreshAvailability(now);
    this.forgetGone(now);
    this.emit('listed');
  }

  /** Forgets the unexpected chairs no successful list has carried for forgetAfterMs. */
  private forgetGone(now: number): void {
    // Every known chair has an entry in `online`: walked as it is, without knownIds()'s set and
    // sort, since this runs after every successful poll. Deleting while walking a Map is safe.
    for (const id of this.online.keys()) {
      if (this.listed.has(id) || this.expected.has(id)) continue;
      const since = this.lastListedAt.get(id);
      if (since === undefined) {
        this.lastListedAt.set(id, now);
        continue;
      }
      if (now - since < this.opts.forgetAfterMs) continue;
      this.states.delete(id);
      this.readings.delete(id);
      this.staleServerTime.delete(id);
      this.online.delete(id);
      this.lastListedAt.delete(id);
      this.emit('removed', id);
    }
  }

  /**
   * One chair's state learned out of band (the status call while confirming a start). The status
   * answer may not carry the chair's names: those the chair had are kept.
   */
  applyReading(reading: ChairReading): ChairState {
    const prev = this.readings.get(reading.deviceId);
    if (prev && (reading.deviceCode === null || reading.deviceName === null || reading.location === null)) {
      reading = { ...reading, deviceCode: reading.deviceCode ?? prev.deviceCode, deviceName: reading.deviceName ?? prev.deviceName, location: reading.location ?? prev.location };
    }
    return this.apply(reading);
  }

  /**
   * Work in proportion to what changed: a chair whose reading is the same as last time (all but
   * ServerTime) costs a comparison; its state is rebuilt, and announced, only when it differs.
   */
  private apply(reading: ChairReading): ChairState {
    const prevReading = this.readings.get(reading.deviceId);
    const prev = this.states.get(reading.deviceId);
    this.readings.set(reading.deviceId, reading);
    if (!this.online.has(reading.deviceId)) this.online.set(reading.deviceId, false);
    if (prev && prevReading && sameReading(prevReading, reading)) {
      if (prevReading.serverTime !== reading.serverTime) this.staleServerTime.add(reading.deviceId);
      return prev;
    }
    const next = chairStateFrom(reading, this.opts);
    this.staleServerTime.delete(reading.deviceId);
    this.states.set(reading.deviceId, next);
    if (!prev || !sameChairState(prev, next)) this.emit('state', next);
    return next;
  }

  /** Re-evaluates freshness; call on a timer and after every poll, successful or not. */
  refreshAvailability(now: number): void {
    const fresh = this.isFresh(now);
    // Every known chair has an entry in `online` (expected ones from the start, listed ones when read).
    for (const id of this.online.keys()) {
      const next = fresh && this.listed.has(id);
      if (this.online.get(id) !== next) {
        this.online.set(id, next);
        this.emit('availability', id, next);
      }
    }
  }

  isFresh(now: number): boolean {
    return this.lastSuccessAt !== null && now - this.lastSuccessAt < this.opts.staleAfterMs;
  }

  /** When the list goes stale if no poll succeeds before then; null before the first success. */
  staleAt(): number | null {
    return this.lastSuccessAt === null ? null : this.lastSuccessAt + this.opts.staleAfterMs;
  }

  lastSuccess(): number | null {
    return this.lastSuccessAt;
  }

  knownIds(): string[] {
    return [...new Set([...this.online.keys(), ...this.states.keys()])].sort();
  }

  view(deviceId: string): ChairView | null {
    if (!this.online.has(deviceId) && !this.states.has(deviceId)) return null;
    return { deviceId, state: this.state(deviceId), online: this.online.get(deviceId) ?? false };
  }

  /** The chair's state, with the latest ServerTime the vendor gave (converted only when asked). */
  private state(deviceId: string): ChairState | null {
    const state = this.states.get(deviceId);
    if (!state) return null;
    if (!this.staleServerTime.delete(deviceId)) return state;
    const fresh = { ...state, serverTime: chairStateFrom(this.readings.get(deviceId) as ChairReading, this.opts).serverTime };
    this.states.set(deviceId, fresh);
    return fresh;
  }

  views(): ChairView[] {
    return this.knownIds().map((id) => this.view(id) as ChairView);
  }
}
