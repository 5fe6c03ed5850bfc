import { randomBytes } from 'node:crypto';
import type { Clock, Timer } from '../platform/clock.js';
import { formatVendorTime } from '../time/vendor-time.js';

export interface SimChair {
  deviceId: string;
  deviceCode: string;
  deviceName: string;
  firmwareVersion: string;
  sessionEndsAt: number | null;
  /** Overrides, for tests and demos. */
  statusOverride: string | null;
  seatedOverride: boolean | null;
  /** Left out of the chair list (a chair that vanished). */
  hidden: boolean;
  /** The site it stands at (an account that spans sites). */
  location: string;
}

export interface SimTransaction {
  seq: number;
  createdAt: number;
  endsAt: number;
  record: Record<string, unknown>;
}

export type PaymentMethod = 'promptpay' | 'manual';

export interface SimModelOptions {
  chairs: number;
  location: string;
  /** Chairs spread over these sites in turn (an account that spans sites); else all at `location`. */
  locations?: readonly string[] | undefined;
  timeZone: string;
  /** Real milliseconds in one session minute; 60000 is real time. */
  minuteMs: number;
  clock: Clock;
  /** Called when a transaction is created or changes status. */
  onTransaction: (record: Record<string, unknown>) => void;
}

export type StartOutcome = { ok: true; transaction: Record<string, unknown> } | { ok: false; reason: 'not_found' | 'busy' };

/** Chairs whose sessions count down, and the transactions they leave behind. */
export class SimModel {
  readonly chairs = new Map<string, SimChair>();
  readonly transactions: SimTransaction[] = [];
  private readonly idPrefix = randomBytes(3).toString('hex').toUpperCase();
  private seq = 0;
  private readonly timers = new Set<Timer>();

  constructor(private readonly opts: SimModelOptions) {
    for (let i = 1; i <= opts.chairs; i++) {
      const id = `MC${7000 + i}`;
      this.chairs.set(id, {
        deviceId: id,
        deviceCode: `C${String(i).padStart(2, '0')}`,
        deviceName: `Massage Chair ${i}`,
        firmwareVersion: '01.04.12',
        sessionEndsAt: null,
        statusOverride: null,
        seatedOverride: null,
        hidden: false,
        location: opts.locations?.length ? (opts.locations[(i - 1) % opts.locations.length] as string) : opts.location,
      });
    }
  }

  remainingMs(chair: SimChair): number {
    if (chair.sessionEndsAt === null) return 0;
    return Math.max(0, chair.sessionEndsAt - this.opts.clock.now());
  }

  isRunning(chair: SimChair): boolean {
    return this.remainingMs(chair) > 0;
  }

  /** The live-state object the vendor nests under "data" (and flattens in the status call). */
  chairState(chair: SimChair): Record<string, unknown> {
    const remainingSimSeconds = Math.ceil((this.remainingMs(chair) / this.opts.minuteMs) * 60);
    const running = remainingSimSeconds > 0;
    return {
      Status: chair.statusOverride ?? (running ? 'Running' : 'Available'),
      Seated: chair.seatedOverride ?? running,
      LeftMin: running ? Math.floor(remainingSimSeconds / 60) : null,
      LeftSec: running ? remainingSimSeconds % 60 : null,
      ServerTime: formatVendorTime(this.opts.clock.now(), this.opts.timeZone),
      FirmwareVersion: chair.firmwareVersion,
    };
  }

  listEntry(chair: SimChair): Record<string, unknown> {
    return {
      DeviceId: chair.deviceId,
      DeviceCode: chair.deviceCode,
      DeviceName: chair.deviceName,
      Location: chair.location,
      data: this.chairState(chair),
    };
  }

  /** A session: the control call (manual) or a customer's payment (promptpay). */
  start(deviceId: string, minutes: number, method: PaymentMethod): StartOutcome {
    const chair = this.chairs.get(deviceId);
    if (!chair) return { ok: false, reason: 'not_found' };
    const statusIdle = chair.statusOverride === null || chair.statusOverride === 'Available';
    if (this.isRunning(chair) || !statusIdle) return { ok: false, reason: 'busy' };
    const now = this.opts.clock.now();
    const durationMs = minutes * this.opts.minuteMs;
    chair.sessionEndsAt = now + durationMs;
    const tx = this.addTransaction(chair, now, minutes, method, 'playing', durationMs);
    const timer = this.opts.clock.setTimeout(() => {
      this.timers.delete(timer);
      tx.record['Status'] = 'finished';
      this.opts.onTransaction({ ...tx.record });
    }, durationMs);
    this.timers.add(timer);
    this.opts.onTransaction({ ...tx.record });
    return { ok: true, transaction: { ...tx.record } };
  }

  /** Finished transactions spread over the past `spreadMs`, oldest first, for sync tests. */
  backfill(count: number, spreadMs: number, deviceId?: string): number {
    const ids = deviceId ? [deviceId] : [...this.chairs.keys()];
    const now = this.opts.clock.now();
    for (let i = 0; i < count; i++) {
      const chair = this.chairs.get(ids[i % ids.length] ?? '');
      if (!chair) continue;
      const at = now - spreadMs + Math.floor((spreadMs * i) / Math.max(1, count));
      this.addTransaction(chair, at, 5, i % 3 === 0 ? 'manual' : 'promptpay', 'finished', 0);
    }
    return count;
  }

  private addTransaction(chair: SimChair, at: number, minutes: number, method: PaymentMethod, status: string, durationMs: number): SimTransaction {
    this.seq += 1;
    const n = String(this.seq).padStart(6, '0');
    const record: Record<string, unknown> = {
      TransactionId: `TX${this.idPrefix}${n}`,
      TransactionCode: `${chair.deviceCode}-${n}`,
      TransactionTime: formatVendorTime(at, this.opts.timeZone),
      Location: chair.location,
      Status: status,
      Amount: method === 'manual' ? '0.00' : (minutes * 20).toFixed(2),
      PlayTime: String(minutes),
      MassageChair: chair.deviceCode,
      Label: chair.deviceName,
      DeviceId: chair.deviceId,
      PaymentMethod: method,
      PaymentReference: method === 'manual' ? '' : `PP${this.idPrefix}${n}`,
    };
    const tx: SimTransaction = { seq: this.seq, createdAt: at, endsAt: at + durationMs, record };
    this.transactions.push(tx);
    return tx;
  }

  /** The transaction list: from/to on TransactionTime (second precision), then order, offset, limit. */
  queryTransactions(from: number | null, to: number | null, order: string, offset: number, limit: number): Record<string, unknown>[] {
    const inWindow = this.transactions.filter((t) => {
      const at = Math.floor(t.createdAt / 1000) * 1000;
      return (from === null || at >= from) && (to === null || at <= to);
    });
    inWindow.sort((a, b) => a.createdAt - b.createdAt || a.seq - b.seq);
    if (order !== 'chronological') inWindow.reverse();
    return inWindow.slice(offset, offset + limit).map((t) => ({ ...t.record }));
  }

  stop(): void {
    for (const t of this.timers) t.cancel();
    this.timers.clear();
  }
}
