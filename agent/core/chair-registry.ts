import { EventEmitter } from 'node:events';
import type { ChairReading } from '../vendor/vendor-api.js';
import { chairStateFrom, sameChairState, type ChairState, type StateOptions } from './chair-state.js';

export interface ChairView {
  deviceId: string;
  state: ChairState | null;
  /** In the latest successful list, and that list is fresh. */
  online: boolean;
}

export interface RegistryEvents {
  state: [ChairState];
  availability: [deviceId: string, online: boolean];
}

export interface RegistryOptions extends StateOptions {
  /** A list older than this is stale: every chair goes offline. */
  staleAfterMs: number;
  /** Chairs the site expects (buttons, LEDs) even before the vendor lists them. */
  expected: readonly string[];
}

/**
 * The agent's picture of the chairs: latest state per chair, whether each was in the latest
 * successful list, and whether that list is still fresh. Emits only on change. Times given to it
 * are monotonic milliseconds: a wall clock set back would keep a failing list "fresh".
 */
export class ChairRegistry extends EventEmitter<RegistryEvents> {
  private readonly states = new Map<string, ChairState>();
  private readonly listed = new Set<string>();
  private readonly online = new Map<string, boolean>();
  private lastSuccessAt: number | null = null;

  constructor(private readonly opts: RegistryOptions) {
    super();
    for (const id of opts.expected) this.online.set(id, false);
  }

  /** A successful list at `now`. */
  applyList(readings: readonly ChairReading[], now: number): void {
    this.lastSuccessAt = now;
    this.listed.clear();
    for (const reading of readings) {
      this.listed.add(reading.deviceId);
      this.applyReading(reading);
    }
    this.refreshAvailability(now);
  }

  /** One chair's state learned out of band (the status call while confirming a start). */
  applyReading(reading: ChairReading): ChairState {
    const next = chairStateFrom(reading, this.opts);
    const prev = this.states.get(reading.deviceId);
    if (!prev || !sameChairState(prev, next)) {
      this.states.set(reading.deviceId, next);
      this.emit('state', next);
    } else if (prev.serverTime !== next.serverTime) {
      // Keep the latest server time for whoever reads it next, without announcing a change.
      this.states.set(reading.deviceId, next);
    }
    if (!this.online.has(reading.deviceId)) this.online.set(reading.deviceId, false);
    return next;
  }

  /** Re-evaluates freshness; call on a timer and after every poll, successful or not. */
  refreshAvailability(now: number): void {
    const fresh = this.isFresh(now);
    for (const id of this.knownIds()) {
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
    return { deviceId, state: this.states.get(deviceId) ?? null, online: this.online.get(deviceId) ?? false };
  }

  views(): ChairView[] {
    return this.knownIds().map((id) => this.view(id) as ChairView);
  }
}
