import type { Clock, Timer } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../observe/metrics.js';
import { errorMessage } from '../platform/errors.js';
import { BrokerError, type Broker, type CloseInfo } from '../mqtt/broker.js';
import type { Topics } from '../mqtt/topics.js';
import { overPacketLimit } from '../mqtt/packet-size.js';
import { recordIntact, StoreError, type Outbox, type StoredRecord } from '../store/outbox.js';
import type { Component } from '../platform/component.js';
import { AckBatcher } from './ack-batcher.js';
import { InFlightWindow } from './in-flight-window.js';
import { ReadAhead } from './read-ahead.js';
import { ReceivedAtText, transactionPayload } from './transaction-payload.js';

export { transactionPayload } from './transaction-payload.js';

/** A record alone in flight when the connection dropped this many times is parked. */
export const STRIKES_TO_PARK = 2;
/** MQTT 5 reason codes that say "not now" rather than "never". */
const TRANSIENT_REASON_CODES = new Set([0x91 /* packet identifier in use */, 0x97 /* quota exceeded */]);
/** A parked record's retry time is checked at least this often (the CLI can make them due). */
const PARKED_CHECK_MAX_MS = 10 * 60_000;
/**
 * New records are sent this long after their commit. The webhook that stored them has just been
 * answered, and a vendor that sends one at a time sends its next request now: read first, that
 * request's commit is on its way to disk on the writer thread while this record is sent, instead
 * of the request waiting on the event loop behind the send (and its PUBACK). One millisecond more
 * on a record's way to the site's systems.
 */
const FRESH_RECORD_DELAY_MS = 1;

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
  /** See InFlightWindowOptions.ackTimeoutMs. */
  ackTimeoutMs?: number;
}

/**
 * Sends undelivered records to B/transactions/<DeviceId> at QoS 1, in the order they were
 * stored, keeping up to a window of them awaiting PUBACK. A record is marked delivered only when
 * its PUBACK has come; after a restart the database still holds every unacknowledged record.
 * Three parts do the work: a read-ahead cursor over the outbox (ReadAhead), the records in flight
 * (InFlightWindow) and the delivered marks (AckBatcher); this class decides what happens to a
 * record the broker does not take.
 *
 * One record must never stop the others. A record the broker refuses (MQTT 5 reason code 0x80 or
 * more), one too large for the broker, or one whose stored text is damaged is parked: set aside,
 * counted, and retried 1 h later, then 2, 4, ... at most every 24 h (parkRetryDelayMs). A record
 * that makes the broker drop the connection (3.1.1 brokers disconnect instead of refusing) is
 * found by sending the records that were in flight one at a time after the reconnect: one that
 * is alone in flight when the connection drops twice is parked.
 */
export class OutboxPublisher implements Component {
  readonly name = 'outbox-publisher';
  private running = false;
  private readonly reader: ReadAhead;
  private readonly window: InFlightWindow;
  private readonly acks: AckBatcher;
  private readonly receivedAt = new ReceivedAtText();
  /** Records being parked (the write is on its way): not to be sent meanwhile. */
  private readonly parking = new Set<number>();
  private retryTimer: Timer | null = null;
  private parkedTimer: Timer | null = null;
  private failures = 0;
  private drained: (() => void) | null = null;
  /** A fill after the PUBACKs that arrived together: their freed slots go out in one write. */
  private refill: NodeJS.Immediate | null = null;
  /** The fill for records just stored (FRESH_RECORD_DELAY_MS). */
  private fresh: Timer | null = null;

  constructor(private readonly deps: PublisherDeps) {
    this.reader = new ReadAhead(deps.outbox, (seq) => this.handled(seq));
    this.window = new InFlightWindow({
      broker: deps.broker,
      clock: deps.clock,
      maxInflight: deps.maxInflight,
      ackTimeoutMs: deps.ackTimeoutMs ?? 10_000,
      onAck: (seq) => this.onAck(seq),
      onFail: (rec, err) => this.onFail(rec, err),
      onDropped: (rec) => this.park(rec, 'the broker acknowledged later records but never this one: it dropped it (a size limit such as message_size_limit?)'),
      onFreed: () => this.pump(),
    });
    this.acks = new AckBatcher({
      outbox: deps.outbox,
      clock: deps.clock,
      logger: deps.logger,
      intervalMs: deps.flushIntervalMs ?? 200,
      onMarked: (n) => deps.metrics.mqttPublished.inc({ kind: 'transaction' }, n),
    });
  }

  private readonly kick = (): void => this.pump();
  /**
   * New records: sent FRESH_RECORD_DELAY_MS later, not inside the commit's callback, so the
   * webhook that stored them is answered first (its 200 waits on nothing but its commit), and
   * the vendor's next request is read before the send.
   */
  private readonly onInserted = (): void => {
    if (this.running)
      this.fresh ??= this.deps.clock.setTimeout(() => {
        this.fresh = null;
        this.pump();
      }, FRESH_RECORD_DELAY_MS);
  };
  private readonly onClose = (info?: CloseInfo): void => {
    this.window.connectionLost(info?.cause ?? null);
    // The next connect reads from the oldest again.
    this.reader.rescan();
  };

  start(): void {
    this.running = true;
    this.window.start();
    this.deps.broker.on('connect', this.kick);
    this.deps.broker.on('settled', this.kick);
    this.deps.broker.on('close', this.onClose);
    this.deps.outbox.on('stored', this.reader.take);
    this.deps.outbox.on('inserted', this.onInserted);
    this.scheduleParkedCheck();
    this.pump();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.window.stop();
    this.acks.markAtOnce();
    this.deps.broker.off('connect', this.kick);
    this.deps.broker.off('settled', this.kick);
    this.deps.broker.off('close', this.onClose);
    this.deps.outbox.off('stored', this.reader.take);
    this.deps.outbox.off('inserted', this.onInserted);
    this.retryTimer?.cancel();
    this.retryTimer = null;
    this.parkedTimer?.cancel();
    this.parkedTimer = null;
    if (this.refill) clearImmediate(this.refill);
    this.refill = null;
    this.fresh?.cancel();
    this.fresh = null;
    if (this.window.size > 0 && this.deps.broker.connected) {
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
    await this.acks.close();
  }

  /** Records handed to the broker and not yet acknowledged. */
  get inFlight(): number {
    return this.window.size;
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
      this.reader.rescan();
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

  private pump(): void {
    const { broker } = this.deps;
    if (!this.running || !broker.connected || this.retryTimer) return;
    broker.batch(() => this.fill());
  }

  /** Fills the window; the broker sends what it adds in one write. */
  private fill(): void {
    try {
      while (this.window.size < this.window.capacity()) {
        const rec = this.reader.next();
        if (!rec) return;
        if (!this.handled(rec.seq)) this.send(rec);
      }
    } catch (err) {
      // The database reports itself (health); try again shortly.
      this.retryLater(err instanceof StoreError ? err.message : errorMessage(err));
    }
  }

  /** In flight, acknowledged and not yet known to be marked, or being parked: not to be sent again. */
  private handled(seq: number): boolean {
    return this.window.has(seq) || this.acks.has(seq) || this.parking.has(seq);
  }

  private send(rec: StoredRecord): void {
    const { broker, topics, siteId, timeZone } = this.deps;
    if (!recordIntact(rec)) {
      this.park(rec, 'its stored text is damaged (checksum mismatch)');
      return;
    }
    const topic = topics.transaction(rec.deviceId);
    const payload = transactionPayload(rec, siteId, timeZone, this.receivedAt);
    const limit = broker.maximumPacketSize();
    if (limit !== undefined && overPacketLimit(limit, topic, payload)) {
      this.park(rec, `it is larger than the broker's maximum packet size (${limit} bytes)`);
      return;
    }
    this.window.send(rec, topic, payload);
  }

  private onAck(seq: number): void {
    this.failures = 0;
    this.acks.add(seq);
    if (this.window.size === 0) this.drained?.();
    // mqtt.js hands over the PUBACKs of one read one per tick: refilling after each would send
    // one PUBLISH per write.
    this.pumpSoon();
  }

  /** One fill on the next turn for everything that freed slots or arrived meanwhile. */
  private pumpSoon(): void {
    if (this.running)
      this.refill ??= setImmediate(() => {
        this.refill = null;
        this.pump();
      });
  }

  private onFail(rec: StoredRecord, err: unknown): void {
    if (this.window.size === 0) this.drained?.();
    if (!this.running) return;
    if (err instanceof BrokerError && err.kind === 'disconnected') {
      const strikes = this.window.strikes(rec.seq);
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
      this.acks.flush();
      this.reader.rescan();
      this.pump();
    }, delay);
  }

  /** Sets a record aside (a write on the store's thread); until it is committed the record is not sent again. */
  private park(rec: StoredRecord, reason: string): void {
    this.window.clear(rec.seq);
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
}
