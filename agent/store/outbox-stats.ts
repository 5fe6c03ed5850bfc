import { WATERMARK } from './writes.js';
import type { StoreDatabase } from './database.js';

export interface OutboxStats {
  /** Waiting for the broker, parked ones included. */
  pending: number;
  oldestPendingAt: number | null;
  /** Of those waiting, the ones the broker refused, set aside and retried later. */
  parked: number;
  delivered: number;
  lastDeliveryAt: number | null;
}

export const NO_STATS: OutboxStats = Object.freeze({ pending: 0, oldestPendingAt: null, parked: 0, delivered: 0, lastDeliveryAt: null });

/** O(1) at any backlog: counters kept with the rows, and the oldest waiting by the seq index. */
export function readStats(db: StoreDatabase): OutboxStats {
  if (!db.isOpen) return NO_STATS;
  return db.read('reading the backlog', () => {
    const rows = db.statement<[], { name: string; value: number }>('SELECT name, value FROM counters').all();
    const c = new Map(rows.map((r) => [r.name, r.value]));
    const pendingOldest =
      db.statement<[], number>(`SELECT received_at FROM transactions WHERE seq > ${WATERMARK} AND delivered_at IS NULL AND parked_at IS NULL ORDER BY seq LIMIT 1`).pluck().get() ?? null;
    const parked = c.get('parked') ?? 0;
    const parkedOldest =
      parked > 0
        ? (db.statement<[], number | null>('SELECT MIN(received_at) FROM transactions WHERE delivered_at IS NULL AND parked_at IS NOT NULL').pluck().get() ?? null)
        : null;
    const oldest = pendingOldest === null ? parkedOldest : parkedOldest === null ? pendingOldest : Math.min(pendingOldest, parkedOldest);
    const lastDelivery = c.get('last_delivery_at') ?? 0;
    return { pending: c.get('pending') ?? 0, oldestPendingAt: oldest, parked, delivered: c.get('delivered') ?? 0, lastDeliveryAt: lastDelivery ? lastDelivery : null };
  });
}
