import type { Clock, Timer } from '../platform/clock.js';
import type { Broker } from '../mqtt/broker.js';
import { IntMap } from '../platform/int-map.js';
import type { StoredRecord } from '../store/records.js';

const QOS1 = { qos: 1 } as const;

export interface InFlightWindowOptions {
  broker: Broker;
  clock: Clock;
  maxInflight: number;
  /**
   * A record still unacknowledged this long after it was sent, while later ones were acknowledged,
   * was dropped by the broker (Mosquitto drops an MQTT 5 message over message_size_limit without
   * a PUBACK; acknowledgements come in order, so it will not come).
   */
  ackTimeoutMs: number;
  /** Its PUBACK came. */
  onAck: (seq: number) => void;
  /** The broker refused it or the connection failed it. */
  onFail: (rec: StoredRecord, err: unknown) => void;
  /** The broker acknowledged later records but never this one. */
  onDropped: (rec: StoredRecord) => void;
  /** A look for dropped records freed slots. */
  onFreed: () => void;
}

/** A record in flight, and when it was sent (monotonic; null once its connection has gone). */
interface Sent {
  rec: StoredRecord;
  at: number | null;
}

/**
 * The records handed to the broker and not yet acknowledged: how many may be (the broker's
 * Receive Maximum at most; one at a time while a record is suspected of breaking the connection),
 * when each was sent, which the broker passed over, and the strikes of records that were in
 * flight when a connection dropped.
 */
export class InFlightWindow {
  /** By seq. Not a Map: a flush puts and takes thousands a second (see IntMap). */
  private readonly records = new IntMap<Sent>();
  /** When the last acknowledged record was sent (monotonic). */
  private lastAckAt = -Infinity;
  private ackCheck: Timer | null = null;
  /** Records given up as dropped by the broker while mqtt.js still waits for them. */
  private readonly abandoned = new Set<number>();
  /** Records in flight when a connection dropped, with how often they were alone in flight then. */
  private readonly suspects = new Map<number, number>();
  private running = false;

  constructor(private readonly opts: InFlightWindowOptions) {}

  start(): void {
    this.running = true;
  }

  stop(): void {
    this.running = false;
    this.ackCheck?.cancel();
    this.ackCheck = null;
  }

  get size(): number {
    return this.records.size;
  }

  has(seq: number): boolean {
    return this.records.has(seq);
  }

  /**
   * How many may be in flight. While suspects remain, one, so the one that breaks the connection
   * is known; none while the broker port is still finding its own (a record sent then could take
   * the blame).
   */
  capacity(): number {
    const { broker } = this.opts;
    if (this.suspects.size > 0) return broker.settling?.() ? 0 : 1;
    return Math.max(1, Math.min(this.opts.maxInflight, broker.receiveMaximum()));
  }

  send(rec: StoredRecord, topic: string, payload: string): void {
    this.records.set(rec.seq, { rec, at: this.opts.clock.monotonic() });
    this.armAckCheck();
    this.opts.broker.send(topic, payload, QOS1, (err) => {
      if (!err) this.acked(rec.seq);
      // Failures are handled once mqtt.js has finished with the packet (it may be closing).
      else queueMicrotask(() => this.failed(rec, err));
    });
  }

  private acked(seq: number): void {
    if (this.abandoned.delete(seq)) return; // parked already; its retry sends it again
    this.lastAckAt = this.records.get(seq)?.at ?? this.lastAckAt;
    this.records.delete(seq);
    this.suspects.delete(seq);
    this.opts.onAck(seq);
  }

  private failed(rec: StoredRecord, err: unknown): void {
    if (this.abandoned.delete(rec.seq)) return;
    this.records.delete(rec.seq);
    this.opts.onFail(rec, err);
  }

  /** How often a record was alone in flight when the connection dropped. */
  strikes(seq: number): number {
    return this.suspects.get(seq) ?? 0;
  }

  /** The record is dealt with (parked): it is no longer a suspect. */
  clear(seq: number): void {
    this.suspects.delete(seq);
  }

  /**
   * The connection ended: what was in flight is suspect; one alone in flight gets a strike. Not
   * when the close is put down to another publish (one the broker refused just before, or a
   * suspect retained message sent alone: Mosquitto with max_queued_messages 0 drops the client on
   * a refusal): no record is blamed for it. Their rejections (disconnected) follow.
   */
  connectionLost(cause: string | null): void {
    const alone = this.records.size === 1 && cause === null;
    this.records.forEach((sent, seq) => {
      this.suspects.set(seq, (this.suspects.get(seq) ?? 0) + (alone ? 1 : 0));
      sent.at = null;
    });
    this.lastAckAt = -Infinity;
  }

  /** Looks for records the broker passed over while acknowledging later ones. */
  private armAckCheck(): void {
    if (this.ackCheck || !this.running) return;
    const timeout = this.opts.ackTimeoutMs;
    this.ackCheck = this.opts.clock.setTimeout(() => {
      this.ackCheck = null;
      const now = this.opts.clock.monotonic();
      const dropped: StoredRecord[] = [];
      let timed = 0;
      this.records.forEach(({ rec, at }) => {
        if (at === null) return;
        // Sent before the last acknowledged record, and long enough ago: the broker dropped it.
        if (at < this.lastAckAt && now - at >= timeout) dropped.push(rec);
        else timed++;
      });
      // Parked in the order they were stored, as they were sent.
      dropped.sort((a, b) => a.seq - b.seq);
      for (const rec of dropped) {
        this.records.delete(rec.seq);
        this.abandoned.add(rec.seq);
        this.opts.onDropped(rec);
      }
      if (timed > 0) this.armAckCheck();
      this.opts.onFreed();
    }, Math.max(100, timeout / 2));
  }
}
