import { EventEmitter } from 'node:events';
import type { Clock } from '../platform/clock.js';

export type CheckName = 'vendor' | 'broker' | 'database' | 'gpio' | 'clock';
export const CHECK_NAMES: readonly CheckName[] = ['vendor', 'broker', 'database', 'gpio', 'clock'];

export interface Check {
  ok: boolean;
  detail: string;
  /** When `ok` last flipped. */
  since: number;
}

export interface HealthEvents {
  change: [name: CheckName, check: Check];
  /** A transaction sync finished (lastSyncAt moved): bridge/info shows it at once. */
  synced: [];
}

/**
 * What the agent knows about its own condition: one check per dependency. Feeds /healthz,
 * bridge/info, the status LED, metrics and logs. Emits only when a check flips or its detail
 * changes, so a steady state costs nothing.
 */
export class Health extends EventEmitter<HealthEvents> {
  private readonly checks = new Map<CheckName, Check>();
  readonly startedAt: number;
  lastPollAt: number | null = null;
  lastSyncAt: number | null = null;

  /** A transaction sync finished at `at`. */
  synced(at: number): void {
    this.lastSyncAt = at;
    this.emit('synced');
  }

  constructor(private readonly clock: Clock) {
    super();
    this.startedAt = clock.now();
    const now = clock.now();
    this.checks.set('vendor', { ok: false, detail: 'no poll yet', since: now });
    this.checks.set('broker', { ok: false, detail: 'not connected yet', since: now });
    this.checks.set('database', { ok: false, detail: 'not open yet', since: now });
    this.checks.set('gpio', { ok: true, detail: 'no GPIO lines configured', since: now });
    this.checks.set('clock', { ok: true, detail: 'no ServerTime from the vendor yet', since: now });
  }

  /** Returns true when the check changed. */
  set(name: CheckName, ok: boolean, detail: string): boolean {
    const prev = this.checks.get(name);
    if (prev && prev.ok === ok && prev.detail === detail) return false;
    const next: Check = { ok, detail, since: prev && prev.ok === ok ? prev.since : this.clock.now() };
    this.checks.set(name, next);
    this.emit('change', name, next);
    return true;
  }

  get(name: CheckName): Check {
    return this.checks.get(name) as Check;
  }

  get ok(): boolean {
    return CHECK_NAMES.every((n) => this.get(n).ok);
  }

  snapshot(): { status: 'ok' | 'degraded'; checks: Record<CheckName, Check> } {
    const checks = Object.fromEntries(CHECK_NAMES.map((n) => [n, { ...this.get(n) }])) as Record<CheckName, Check>;
    return { status: this.ok ? 'ok' : 'degraded', checks };
  }
}
