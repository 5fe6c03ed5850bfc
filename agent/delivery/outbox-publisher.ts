import type { Clock, Timer } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../observe/metrics.js';
import { errorMessage } from '../platform/errors.js';
import { formatIsoWithOffset } from '../time/vendor-time.js';
import { BrokerError, type Broker, type CloseInfo } from '../mqtt/broker.js';
import type { Topics } from '../mqtt/topics.js';
import { recordIntact, StoreError, type Outbox, type StoredRecord } from '../store/outbox.js';
import type { Component } from '../platform/component.js';

const READ_AHEAD = 500;
const QOS1 = { qos: 1 } as const;
/** A record alone in flight when the connection dropped this many times is parked. */
export const STRIKES_TO_PARK = 2;
/** MQTT 5 reason codes that say "not now" rather than "never". */
const TRANSIENT_REASON_CODES = new Set([0x91 /* packet identifier in use */, 0x97 /* quota exceeded */]);
/** A parked record's retry time is checked at least this often (the CLI can make them due). */
const PARKED_CHECK_MAX_MS = 10 * 60_000;

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
  /**
   * A record still unacknowledged this long after it was sent, while later ones were acknowledged,
   * was dropped by the broker (Mosquitto drops an MQTT 5 message over message_size_limit without
   * a PUBACK; acknowledgements come in order, so it will not come).
   */
  ackTimeoutMs?: number;
}

/** receivedAt is the same for a whole batch: formatted once. */
let lastReceived = { at: Number.NaN, zone: '', text: '' };
function receivedText(at: number, timeZone: string): string {
  if (lastReceived.at !== at || lastReceived.zone !== timeZone) lastReceived = { at, zone: timeZone, text: formatIsoWithOffset(at, timeZone) };
  return lastReceived.text;
}

/** The record as published: the vendor's fields verbatim, plus one object `agent`. */
export function transactionPayload(rec: StoredRecord, siteId: string, timeZone: string): string {
  const startRequest = rec.startRequest ? `,"startRequest":${rec.startRequest}` : '';
  const agent = `{"site":${JSON.stringify(siteId)},"source":"${rec.source}","receivedAt":"${receivedText(rec.receivedAt, timeZone)}","seq":${rec.seq}${startRequest}}`;
  const body = rec.record.trimEnd();
  const inner = body.slice(1, -1).trim();
  return `{${inner}${inner === '' ? '' : ','}"agent":${agent}}`;
}

/** Bytes of a QoS 1 PUBLISH packet: fixed header, topic, packet id, properties, payload. */
function publishPacketBytes(topic: string, payload: string): number {
  const remaining = 2 + Buffer.byteLength(topic) + 2 + 1 + Buffer.byteLength(payload);
  return 1 + (remaining < 128 ? 1 : remaining < 16_384 ? 2 : remaining < 2_097_152 ? 3 : 4) + remaining;
}

/**
 * Sends undelivered records to B/transactions/<DeviceId> at QoS 1, in the order they were
 * stored, keeping up to a window of them awaiting PUBACK (the broker's Receive Maximum at most).
 * A record is marked delivered only when its PUBACK has come; after a restart the database still
 * holds every unacknowledged record.
 *
 * One record must never stop the others. A record the broker refuses (MQTT 5 reason code 0x80 or
 * more), one too large for the broker, or one whose stored text is damaged is parked: set aside,
 * counted, and retried 1 h later, then 2, 4, ... at most every 24 h (Outbox.parkRetryDelayMs).
 * A record that makes the broker drop the connection (3.1.1 brokers disconnect instead of
 * refusing) is found by sending the records that were in flight one at a time after the
 * reconnect: one that is alone in flight when the connection drops twice is parked.
 */
export class OutboxPublisher implements Component {
  readonly name = 'outbox-publisher';
  private running = false;
  private readonly inflight = new Map<number, StoredRecord>();
  /** When each record in flight was sent (monotonic), and when the last PUBACK came. */
  private readonly sentAt = new Map<number, number>();
  private lastAckAt = -Infinity;
  private ackCheck: Timer | null = null;
  /** Records given up as dropped by the broker while mqtt.js still waits for them. */
  private readonly abandoned = new Set<number>();
  /** Read ahead of the window, so the database is read in batches rather than per record. */
  private queue: StoredRecord[] = [];
  private queueAt = 0;
  /** Highest seq read from the database since the last rescan. */
  private lastRead = 0;
  /** Acknowledged but not yet marked in the database. */
  private acked = new Set<number>();
  /** Acknowledged and being marked (on the store's thread); settled when `marked` is null. */
  private marking: ReadonlySet<number> = new Set<number>();
  private marked: Promise<void> | null = null;
  /** Records in flight when a connection dropped, with how often they were alone in flight then. */
  private readonly suspects = new Map<number, number>();
  /** Records being parked (the write is on its way): not to be sent meanwhile. */
  private readonly parking = new Set<number>();
  private flushTimer: Timer | null = null;
  private retryTimer: Timer | null = null;
  private parkedTimer: Timer | null = null;
  private failures = 0;
  private drained: (() => void) | null = null;
  /** A fill after the PUBACKs that arrived together: their freed slots go out in one write. */
  private refill: NodeJS.Immediate | null = null;

  constructor(private readonly deps: PublisherDeps) {}

  private readonly kick = (): void => this.pump();
  /** The last read reached the end of the outbox: what is stored next can be taken as it comes. */
  private atEnd = false;
  /**
   * The outbox's change count when it was last read, or when all that changed since was handed
   * over: while it stands and the last read reached the end, there is nothing new to read (no
   * query per PUBACK while records come one by one). Any other write makes the next fill read.
   */
  private seen = -1;
  /** New records as committed: appended to the queue when it is caught up, so they are not read back. */
  private readonly onStored = (records: readonly StoredRecord[]): void => {
    const first = records[0];
    if (!first) return;
    // Commits on the worker thread and on the event loop (the sync) can be reported out of seq
    // order: records older than what was read are found by reading again from the start.
    if (first.seq <= this.lastRead) {
      if (!this.handled(first.seq)) this.rescan();
      return;
    }
    if (!this.atEnd) return;
    // Bounded like a read: while the broker is away the outbox, not memory, holds the backlog.
    if (this.queue.length - this.queueAt + records.length > READ_AHEAD) {
      this.atEnd = false;
      return;
    }
    this.queue = this.queue.slice(this.queueAt).concat(records);
    this.queueAt = 0;
    this.lastRead = (records[records.length - 1] as StoredRecord).seq;
    // This commit is the one change since the last look: the queue holds all there is.
    const now = this.deps.outbox.changeCount;
    if (this.seen === now - 1) this.seen = now;
  };
  private readonly onInserted = (): void => this.pump();
  private readonly onClose = (info?: CloseInfo): void => this.connectionLost(info?.cause ?? null);

  start(): void {
    this.running = true;
    this.deps.broker.on('connect', this.kick);
    this.deps.broker.on('settled', this.kick);
    this.deps.broker.on('close', this.onClose);
    this.deps.outbox.on('stored', this.onStored);
    this.deps.outbox.on('inserted', this.onInserted);
    this.scheduleParkedCheck();
    this.pump();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.deps.broker.off('connect', this.kick);
    this.deps.broker.off('settled', this.kick);
    this.deps.broker.off('close', this.onClose);
    this.deps.outbox.off('stored', this.onStored);
    this.deps.outbox.off('inserted', this.onInserted);
    this.retryTimer?.cancel();
    this.retryTimer = null;
    this.parkedTimer?.cancel();
    this.parkedTimer = null;
    this.ackCheck?.cancel();
    this.ackCheck = null;
    if (this.refill) clearImmediate(this.refill);
    this.refill = null;
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
    // Each mark that settles while stopping starts the next, for the PUBACKs that came meanwhile.
    while (this.marked) await this.marked;
  }

  /** Records handed to the broker and not yet acknowledged. */
  get inFlight(): number {
    return this.inflight.size;
  }

  /** Parked records due now go back to waiting (an operator asked, or their time came); resolves to how many. */
  async retryParked(all = false): Promise<number> {
    const now = this.deps.clock.now();
    let n = 0;
    try {
      n = all ? await this.deps.outbox.parking.retryAllNow(now) : await this.deps.outbox.parking.unparkDue(now);
    } catch (err) {
      this.deps.logger.error({ err: errorMessage(err) }, 'cannot retry parked records');
    }
    if (n > 0) {
      this.deps.logger.info({ records: n }, 'retrying parked records');
      this.rescan();
      this.pump();
    }
    this.scheduleParkedCheck();
    return n;
  }

  private scheduleParkedCheck(): void {
    this.parkedTimer?.cancel();
    this.parkedTimer = null;
    if (!this.running) return;
    let next: number | null = null;
    try {
      next = this.deps.outbox.parking.nextRetry();
    } catch {
      // the database reports itself
    }
    if (next === null) return;
    const delay = Math.min(PARKED_CHECK_MAX_MS, Math.max(1_000, next - this.deps.clock.now()));
    this.parkedTimer = this.deps.clock.setTimeout(() => {
      this.parkedTimer = null;
      void this.retryParked();
    }, delay);
  }

  /** Read again from the oldest undelivered record; what is in flight or acknowledged is skipped. */
  private rescan(): void {
    this.queue = [];
    this.queueAt = 0;
    this.lastRead = 0;
    this.atEnd = false;
  }

  /**
   * While suspects remain, one record at a time, so the one that breaks the connection is known;
   * none while the broker port is still finding its own (a record sent then could take the blame).
   */
  private window(): number {
    if (this.suspects.size > 0) return this.deps.broker.settling?.() ? 0 : 1;
    return Math.max(1, Math.min(this.deps.maxInflight, this.deps.broker.receiveMaximum()));
  }

  private pump(): void {
    const { broker } = this.deps;
    if (!this.running || !broker.connected || this.retryTimer) return;
    broker.batch(() => this.fill());
  }

  /** Fills the window; the broker sends what it adds in one write. */
  private fill(): void {
    const { outbox } = this.deps;
    try {
      while (this.inflight.size < this.window()) {
        if (this.queueAt >= this.queue.length) {
          if (this.atEnd && this.seen === outbox.changeCount) return;
          this.seen = outbox.changeCount;
          this.queue = outbox.pending(this.lastRead, READ_AHEAD);
          this.queueAt = 0;
          this.atEnd = this.queue.length < READ_AHEAD;
          if (this.queue.length === 0) return;
          this.lastRead = (this.queue[this.queue.length - 1] as StoredRecord).seq;
        }
        const rec = this.queue[this.queueAt++] as StoredRecord;
        if (!this.handled(rec.seq)) this.send(rec);
      }
    } catch (err) {
      // The database reports itself (health); try again shortly.
      this.retryLater(err instanceof StoreError ? err.message : errorMessage(err));
    }
  }

  /** In flight, acknowledged and not yet known to be marked, or being parked: not to be sent again. */
  private handled(seq: number): boolean {
    return this.inflight.has(seq) || this.acked.has(seq) || this.marking.has(seq) || this.parking.has(seq);
  }

  private send(rec: StoredRecord): void {
    const { broker, topics, siteId, timeZone } = this.deps;
    if (!recordIntact(rec)) {
      this.park(rec, 'its stored text is damaged (checksum mismatch)');
      return;
    }
    const topic = topics.transaction(rec.deviceId);
    const payload = transactionPayload(rec, siteId, timeZone);
    const limit = broker.maximumPacketSize();
    // A UTF-16 code unit is at most 3 bytes of UTF-8: most records are counted without a scan.
    if (limit !== undefined && 3 * (topic.length + payload.length) + 16 > limit && publishPacketBytes(topic, payload) > limit) {
      this.park(rec, `it is larger than the broker's maximum packet size (${limit} bytes)`);
      return;
    }
    this.inflight.set(rec.seq, rec);
    this.sentAt.set(rec.seq, this.deps.clock.monotonic());
    this.armAckCheck();
    broker.send(topic, payload, QOS1, (err) => {
      if (!err) this.onAck(rec.seq);
      // Failures are handled once mqtt.js has finished with the packet (it may be closing).
      else queueMicrotask(() => this.onFail(rec, err));
    });
  }

  private onAck(seq: number): void {
    if (this.abandoned.delete(seq)) return; // parked already; its retry sends it again
    this.inflight.delete(seq);
    this.lastAckAt = this.sentAt.get(seq) ?? this.lastAckAt;
    this.sentAt.delete(seq);
    this.suspects.delete(seq);
    this.failures = 0;
    this.acked.add(seq);
    // While stopping, mark at once: the database is still open until the broker connection ends.
    if (this.acked.size >= 2000 || !this.running) this.flush();
    else this.flushTimer ??= this.deps.clock.setTimeout(() => this.flush(), this.deps.flushIntervalMs ?? 200);
    if (this.inflight.size === 0) this.drained?.();
    // mqtt.js hands over the PUBACKs of one read one per tick: refilling after each would send
    // one PUBLISH per write.
    if (this.running) this.refill ??= setImmediate(() => {
      this.refill = null;
      this.pump();
    });
  }

  /** Looks for records the broker passed over while acknowledging later ones. */
  private armAckCheck(): void {
    if (this.ackCheck || !this.running) return;
    const timeout = this.deps.ackTimeoutMs ?? 10_000;
    this.ackCheck = this.deps.clock.setTimeout(() => {
      this.ackCheck = null;
      const now = this.deps.clock.monotonic();
      for (const [seq, at] of [...this.sentAt]) {
        // Sent before the last acknowledged record, and long enough ago: the broker dropped it.
        if (at < this.lastAckAt && now - at >= timeout) {
          const rec = this.inflight.get(seq);
          this.inflight.delete(seq);
          this.sentAt.delete(seq);
          this.abandoned.add(seq);
          if (rec) this.park(rec, `the broker acknowledged later records but never this one: it dropped it (a size limit such as message_size_limit?)`);
        }
      }
      if (this.sentAt.size > 0) this.armAckCheck();
      this.pump();
    }, Math.max(100, timeout / 2));
  }

  /**
   * The connection ended: what was in flight is suspect; one alone in flight gets a strike. Not
   * when the close is put down to another publish (one the broker refused just before, or a
   * suspect retained message sent alone: Mosquitto with max_queued_messages 0 drops the client on
   * a refusal): no record is blamed for it.
   */
  private connectionLost(cause: string | null): void {
    const alone = this.inflight.size === 1 && cause === null ? (this.inflight.keys().next().value as number) : null;
    for (const seq of this.inflight.keys()) {
      const strikes = (this.suspects.get(seq) ?? 0) + (seq === alone ? 1 : 0);
      this.suspects.set(seq, strikes);
    }
    this.sentAt.clear();
    this.lastAckAt = -Infinity;
    // Their rejections (disconnected) follow; the next connect reads from the oldest again.
    this.rescan();
  }

  private onFail(rec: StoredRecord, err: unknown): void {
    if (this.abandoned.delete(rec.seq)) return;
    this.inflight.delete(rec.seq);
    this.sentAt.delete(rec.seq);
    if (this.inflight.size === 0) this.drained?.();
    if (!this.running) return;
    if (err instanceof BrokerError && err.kind === 'disconnected') {
      const strikes = this.suspects.get(rec.seq) ?? 0;
      if (strikes >= STRIKES_TO_PARK) this.park(rec, `the broker closed the connection each time it was sent (${strikes} times)`);
      return;
    }
    if (err instanceof BrokerError && err.kind === 'refused' && !TRANSIENT_REASON_CODES.has(err.reasonCode ?? 0)) {
      this.park(rec, `the broker refused it: ${err.message}`);
      this.pump();
      return;
    }
    if (err instanceof BrokerError && err.kind === 'invalid') {
      this.park(rec, `it cannot be published: ${err.message}`);
      this.pump();
      return;
    }
    this.failures += 1;
    this.deps.logger.warn(
      { transactionId: rec.transactionId, status: rec.status, seq: rec.seq, err: errorMessage(err) },
      'broker did not take a transaction now; it stays in the outbox and is sent again',
    );
    this.retryLater(errorMessage(err));
  }

  private retryLater(why: string): void {
    if (this.retryTimer || !this.running) return;
    const delay = Math.min(30_000, 500 * 2 ** Math.min(this.failures, 6));
    this.deps.logger.debug({ why, delayMs: delay }, 'publisher pauses');
    this.retryTimer = this.deps.clock.setTimeout(() => {
      this.retryTimer = null;
      this.flush();
      this.rescan();
      this.pump();
    }, delay);
  }

  /** Sets a record aside (a write on the store's thread); until it is committed the record is not sent again. */
  private park(rec: StoredRecord, reason: string): void {
    this.suspects.delete(rec.seq);
    this.parking.add(rec.seq);
    this.deps.outbox.parking.park(rec.seq, reason, this.deps.clock.now()).then(
      (retryAt) => {
        this.parking.delete(rec.seq);
        if (retryAt === null) return;
        this.deps.metrics.parked.inc();
        this.deps.logger.warn(
          { transactionId: rec.transactionId, status: rec.status, deviceId: rec.deviceId, seq: rec.seq, reason, retryAt: new Date(retryAt).toISOString() },
          'transaction parked: the others go on; it is retried later (chair-agent outbox --parked)',
        );
        this.scheduleParkedCheck();
      },
      (err: unknown) => {
        this.parking.delete(rec.seq);
        this.deps.logger.error({ seq: rec.seq, err: errorMessage(err) }, 'cannot park a record');
        this.retryLater(errorMessage(err));
      },
    );
  }

  /** Marks what was acknowledged, one batch at a time; PUBACKs that come meanwhile wait for the next. */
  private flush(): void {
    this.flushTimer?.cancel();
    this.flushTimer = null;
    if (this.acked.size === 0 || this.marked) return;
    const batch = this.acked;
    this.acked = new Set();
    this.marking = batch;
    this.marked = this.deps.outbox.markDelivered([...batch], this.deps.clock.now()).then(
      () => {
        this.deps.metrics.mqttPublished.inc({ kind: 'transaction' }, batch.size);
        this.settleMark(false);
      },
      (err: unknown) => {
        // Kept in memory and tried again; if the agent dies first they are simply sent again.
        for (const seq of batch) this.acked.add(seq);
        this.deps.logger.error({ err: errorMessage(err), records: batch.size }, 'cannot mark delivered records; will retry');
        this.settleMark(true);
      },
    );
  }

  private settleMark(failed: boolean): void {
    this.marking = new Set<number>();
    this.marked = null;
    if (this.acked.size === 0) return;
    if (failed) {
      if (this.running) this.flushTimer = this.deps.clock.setTimeout(() => this.flush(), 5_000);
    } else if (this.acked.size >= 2000 || !this.running) this.flush();
    else this.flushTimer ??= this.deps.clock.setTimeout(() => this.flush(), this.deps.flushIntervalMs ?? 200);
  }
}
