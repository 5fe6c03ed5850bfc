import type { Clock, Timer } from '../clock.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import { errorMessage } from '../errors.js';
import { formatIsoWithOffset } from '../core/vendor-time.js';
import type { Broker } from '../mqtt/broker.js';
import type { Topics } from '../mqtt/topics.js';
import type { Outbox, StoredRecord } from '../store/outbox.js';
import type { Component } from './component.js';

const READ_AHEAD = 500;

export interface PublisherDeps {
  outbox: Outbox;
  broker: Broker;
  topics: Topics;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  siteId: string;
  timeZone: string;
  maxInflight: number;
  /** Acknowledged records are marked delivered in batches at most this often. */
  flushIntervalMs?: number;
}

/** The record as published: the vendor's fields verbatim, plus one object `agent`. */
export function transactionPayload(rec: StoredRecord, siteId: string, timeZone: string): string {
  const agent = JSON.stringify({ site: siteId, source: rec.source, receivedAt: formatIsoWithOffset(rec.receivedAt, timeZone), seq: rec.seq });
  const body = rec.record.trimEnd();
  const inner = body.slice(1, -1).trim();
  return `{${inner}${inner === '' ? '' : ','}"agent":${agent}}`;
}

/**
 * Sends undelivered records to B/transactions/<DeviceId> at QoS 1, in the order they were
 * stored, keeping up to a window of them awaiting PUBACK. A record is marked delivered only when
 * its PUBACK has come. mqtt.js re-sends what was in flight after a reconnect; after a restart
 * the database still holds every unacknowledged record, so nothing is lost either way.
 */
export class OutboxPublisher implements Component {
  readonly name = 'outbox-publisher';
  private running = false;
  private readonly inflight = new Set<number>();
  /** Read ahead of the window, so the database is read in batches rather than per record. */
  private queue: StoredRecord[] = [];
  private queueAt = 0;
  /** Highest seq read from the database since the last rescan. */
  private lastRead = 0;
  /** Acknowledged but not yet marked in the database. */
  private acked = new Set<number>();
  private flushTimer: Timer | null = null;
  private retryTimer: Timer | null = null;
  private failures = 0;
  private drained: (() => void) | null = null;

  constructor(private readonly deps: PublisherDeps) {}

  private readonly kick = (): void => this.pump();

  start(): void {
    this.running = true;
    this.deps.broker.on('connect', this.kick);
    this.deps.outbox.on('inserted', this.kick);
    this.pump();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.deps.broker.off('connect', this.kick);
    this.deps.outbox.off('inserted', this.kick);
    this.retryTimer?.cancel();
    this.retryTimer = null;
    if (this.inflight.size > 0 && this.deps.broker.connected) {
      // Give PUBACKs already on their way a moment, so they need not be sent again next start.
      await new Promise<void>((resolve) => {
        const t = this.deps.clock.setTimeout(resolve, 1_000);
        this.drained = () => {
          t.cancel();
          resolve();
        };
      });
    }
    this.drained = null;
    this.flushTimer?.cancel();
    this.flushTimer = null;
    this.flush();
  }

  /** Records handed to the broker and not yet acknowledged. */
  get inFlight(): number {
    return this.inflight.size;
  }

  private pump(): void {
    const { broker, outbox, maxInflight } = this.deps;
    if (!this.running || !broker.connected || this.retryTimer) return;
    // The broker's Receive Maximum is a limit MQTT 5 says a client must keep to.
    const window = Math.max(1, Math.min(maxInflight, broker.receiveMaximum()));
    while (this.inflight.size < window) {
      if (this.queueAt >= this.queue.length) {
        this.queue = outbox.pending(this.lastRead, READ_AHEAD);
        this.queueAt = 0;
        if (this.queue.length === 0) return;
        this.lastRead = (this.queue[this.queue.length - 1] as StoredRecord).seq;
      }
      const rec = this.queue[this.queueAt++] as StoredRecord;
      if (!this.acked.has(rec.seq) && !this.inflight.has(rec.seq)) this.send(rec);
    }
  }

  private send(rec: StoredRecord): void {
    const { broker, topics, siteId, timeZone } = this.deps;
    this.inflight.add(rec.seq);
    broker
      .publish(topics.transaction(rec.deviceId), transactionPayload(rec, siteId, timeZone), { qos: 1 })
      .then(
        () => this.onAck(rec.seq),
        (err: unknown) => this.onFail(rec, err),
      );
  }

  private onAck(seq: number): void {
    this.inflight.delete(seq);
    this.failures = 0;
    this.acked.add(seq);
    // While stopping, mark at once: the database is still open until the broker connection ends.
    if (this.acked.size >= 500 || !this.running) this.flush();
    else this.flushTimer ??= this.deps.clock.setTimeout(() => this.flush(), this.deps.flushIntervalMs ?? 50);
    if (this.inflight.size === 0) this.drained?.();
    this.pump();
  }

  private onFail(rec: StoredRecord, err: unknown): void {
    this.inflight.delete(rec.seq);
    if (this.inflight.size === 0) this.drained?.();
    if (!this.running) return;
    this.failures += 1;
    this.deps.logger.warn(
      { transactionId: rec.transactionId, status: rec.status, seq: rec.seq, err: errorMessage(err) },
      'broker did not take a transaction; it stays in the outbox and is sent again',
    );
    // After a pause, read again from the oldest undelivered record; what is still in flight is skipped.
    if (!this.retryTimer) {
      const delay = Math.min(30_000, 500 * 2 ** Math.min(this.failures, 6));
      this.retryTimer = this.deps.clock.setTimeout(() => {
        this.retryTimer = null;
        this.flush();
        this.queue = [];
        this.queueAt = 0;
        this.lastRead = 0;
        this.pump();
      }, delay);
    }
  }

  private flush(): void {
    this.flushTimer?.cancel();
    this.flushTimer = null;
    if (this.acked.size === 0) return;
    const batch = [...this.acked];
    try {
      this.deps.outbox.markDelivered(batch, this.deps.clock.now());
      this.acked.clear();
      this.deps.metrics.mqttPublished.inc({ kind: 'transaction' }, batch.length);
    } catch (err) {
      // Kept in memory and tried again; if the agent dies first they are simply sent again.
      this.deps.logger.error({ err: errorMessage(err), records: batch.length }, 'cannot mark delivered records; will retry');
      if (this.running) this.flushTimer = this.deps.clock.setTimeout(() => this.flush(), 5_000);
    }
  }
}
