import { EventEmitter } from 'node:events';
import type { Clock, Timer } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import { BrokerError, type Broker, type BrokerEvents, type CloseInfo, type PublishOptions, type SubscribeOptions } from './broker.js';
import { PACKET_TOO_LARGE } from './packet-size.js';

/** What a topic carries, for counting refusals the way an operator reads them. */
export type TopicClass = 'transaction' | 'chair' | 'availability' | 'discovery' | 'bridge' | 'response';

/** A retained topic the broker refused: not sent again at each connect, only at its retry. */
export interface HeldTopic {
  topic: string;
  topicClass: TopicClass;
  reason: string;
  reasonCode: number | null;
  refusals: number;
  /** When it is tried again, on the wall clock (for people). */
  retryAt: number;
}

/**
 * A held topic as the guard keeps it: due on the monotonic clock, which NTP does not step; and,
 * when it was refused for its size, the smallest payload refused (a smaller one may be taken).
 */
type Held = Omit<HeldTopic, 'retryAt'> & { due: number; bytes: number | null };

export interface RefusalSummary {
  total: number;
  byClass: Partial<Record<TopicClass, number>>;
  held: HeldTopic[];
}

export interface RefusalGuardOptions {
  inner: Broker;
  classify: (topic: string) => TopicClass;
  clock: Clock;
  logger: Logger;
  /** Called once per refusal, for /metrics. */
  onRefusal?: (topicClass: TopicClass) => void;
}

/** The first retry of a held topic, doubled at each refusal up to the last. */
const FIRST_RETRY_MS = 60_000;
const MAX_RETRY_MS = 60 * 60_000;
/** A connection the broker closes this soon after refusing a publish was closed for that publish. */
const CLOSE_AFTER_REFUSAL_MS = 2_000;
/** A suspect not published again this long after a connect is forgotten. */
const FORGET_SUSPECTS_MS = 10_000;
/** A suspect alone in flight when the connection dropped this many times is held. */
const STRIKES_TO_HOLD = 2;
/** Topics remembered as held; past this the oldest is forgotten (it is tried again at a connect). */
const MAX_HELD = 1_000;
/**
 * The largest payload of anything but a transaction record (those are bounded by the webhook's
 * 64 KiB body and parked when refused): a chair state or discovery config is a few hundred bytes,
 * so anything past this comes from a vendor field no site system can use.
 */
export const MAX_PAYLOAD_BYTES = 16 * 1024;

/** What to change, by reason code, in the words of the broker's configuration. */
function hint(reasonCode: number | null, dropped: boolean): string {
  if (dropped) return "the broker closes the connection when it gets this message: check its ACL and message size limit (Mosquitto: acl_file, message_size_limit; with max_queued_messages 0 it drops the client instead of answering)";
  switch (reasonCode) {
    case 0x87:
      return "the broker's ACL does not let this client publish there: allow it (Mosquitto: a 'topic write' line for the agent's user)";
    case 0x95:
      return "the message is larger than the broker accepts: raise its limit (Mosquitto: message_size_limit, max_packet_size) or shorten what makes it large";
    case 0x97:
      return 'the broker is out of quota for this client: check its queue settings (Mosquitto: max_queued_messages, max_queued_bytes)';
    case 0x90:
      return 'the broker refuses this topic name';
    default:
      return 'see the broker log for why it refused it';
  }
}

/**
 * A Broker that no publish the broker refuses can take off the broker. Sits in front of the
 * MQTT adapter:
 * - every refusal (an MQTT 5 reason code >= 0x80) is counted by topic class and logged once
 *   per topic, with the reason and what to change;
 * - a refused *retained* topic (chair state, availability, discovery, bridge info) is held: the
 *   publishes that every connect makes of it are kept aside, not sent, and the latest one is
 *   tried again on a backoff (1 min, doubling to 1 h). A broker that drops the connection right
 *   after refusing (Mosquitto with max_queued_messages 0) therefore drops it once, not at every
 *   reconnect. A topic refused for its size ("Packet too large") lets a smaller payload through
 *   at once: what shrank (a summary that left its detail out) need not wait for the retry;
 * - a close that follows a refusal within 2 s is reported with it (CloseInfo), so the outbox does
 *   not blame the transaction that happened to be in flight;
 * - a payload past MAX_PAYLOAD_BYTES (not a transaction) is refused here, as the broker would.
 * Transactions pass through: the outbox parks its own refused records.
 */
export class RefusalGuard extends EventEmitter<BrokerEvents> implements Broker {
  private readonly held = new Map<string, Held>();
  /** The latest publish kept aside for each held topic, sent at its retry. */
  private readonly pending = new Map<string, { payload: string | Buffer; options: PublishOptions }>();
  private readonly logged = new Set<string>();
  private readonly counts = new Map<TopicClass, number>();
  private lastRefusal: { topic: string; at: number } | null = null;
  private retryTimer: Timer | null = null;
  /** Publishes other than transactions waiting for their acknowledgement, by topic. */
  private readonly inFlight = new Map<string, number>();
  /** Those the connection's end failed: the close may be theirs. */
  private readonly lostAtClose = new Set<string>();
  /**
   * Topics in flight when a connection dropped for no known reason, with how often the
   * connection dropped while each was the only one in flight. Sent one at a time until each
   * is acknowledged, so the one the broker drops the connection on is found; two strikes hold it.
   */
  private readonly suspects = new Map<string, number>();
  private readonly queue: { topic: string; payload: string | Buffer; options: PublishOptions; done: (err: BrokerError | null) => void }[] = [];
  private probing: string | null = null;
  /** Suspects sent again since this connection began; the others are no longer sent, and forgotten. */
  private readonly touched = new Set<string>();
  private forgetTimer: Timer | null = null;
  /** Acknowledged publishes by class: a class the broker has never taken one of may be refused whole. */
  private readonly accepted = new Map<TopicClass, number>();
  /**
   * Classes held whole: two of its topics refused and none ever taken (Home Assistant enabled but
   * the agent's user not allowed homeassistant/#). One of its topics probes at each retry, not
   * all of them: with Mosquitto's max_queued_messages 0 each would cost the connection.
   */
  private readonly classHold = new Map<TopicClass, { reason: string; reasonCode: number | null; refusals: number; due: number }>();
  private lastProbe: { topic: string; payload: string | Buffer; options: PublishOptions } | null = null;

  constructor(private readonly opts: RefusalGuardOptions) {
    super();
  }

  private readonly onInnerConnect = (): void => {
    this.lastRefusal = null;
    this.touched.clear();
    this.emit('connect');
    this.schedule();
    this.probeNext();
    // A suspect no one publishes again (a chair that left the list) must not hold the others.
    this.forgetTimer?.cancel();
    this.forgetTimer = this.opts.clock.setTimeout(() => {
      this.forgetTimer = null;
      let forgot = false;
      for (const topic of [...this.suspects.keys()]) {
        if (this.touched.has(topic) || this.probing === topic) continue;
        this.suspects.delete(topic);
        forgot = true;
      }
      if (forgot && this.suspects.size === 0) this.emit('settled');
    }, FORGET_SUSPECTS_MS);
  };
  private readonly onInnerClose = (): void => {
    const r = this.lastRefusal;
    const refused = r !== null && this.opts.clock.monotonic() - r.at <= CLOSE_AFTER_REFUSAL_MS ? r.topic : null;
    // The inner broker failed what was in flight (disconnected) just before this: see send().
    const probe = this.probing !== null && this.lostAtClose.has(this.probing) ? this.probing : null;
    const lost = [...this.lostAtClose];
    this.lastRefusal = null;
    this.lostAtClose.clear();
    this.inFlight.clear();
    this.probing = null;
    this.retryTimer?.cancel();
    this.retryTimer = null;
    this.forgetTimer?.cancel();
    this.forgetTimer = null;
    for (const q of this.queue.splice(0)) q.done(new BrokerError('disconnected', 'the connection to the broker ended first'));
    let cause = refused;
    // A refusal read before the close, or a second close with the same suspect alone in flight:
    // the broker closed this connection for what it was sent. One strike is not yet known.
    let forPublish = refused !== null;
    if (cause === null && probe !== null) {
      const strikes = (this.suspects.get(probe) ?? 0) + 1;
      if (strikes >= STRIKES_TO_HOLD) {
        forPublish = true;
        this.suspects.delete(probe);
        const err = new BrokerError('refused', `the broker closed the connection each time it was sent alone (${strikes} times)`);
        this.note(probe, this.opts.classify(probe), err, true);
        this.hold(probe, this.opts.classify(probe), err, this.lastProbe?.topic === probe ? this.lastProbe.payload : '', this.lastProbe?.topic === probe ? this.lastProbe.options : { qos: 1, retain: true });
      } else {
        this.suspects.set(probe, strikes);
      }
      cause = probe;
    } else if (cause === null) {
      for (const topic of lost) if (this.suspects.size < MAX_HELD && !this.suspects.has(topic)) this.suspects.set(topic, 0);
    }
    if (refused !== null) {
      this.opts.logger.warn({ topic: refused }, 'the broker closed the connection right after refusing a publish; that topic is held, the rest flows');
      // Each smaller payload that is still too large would cost the connection again: none goes before the retry.
      const held = this.held.get(refused);
      if (held) held.bytes = null;
    }
    if (forPublish) this.opts.inner.closedForPublish?.();
    const info: CloseInfo = { cause, othersInFlight: lost.length > 0 };
    this.emit('close', info);
  };
  private readonly onInnerMessage = (...args: BrokerEvents['message']): void => void this.emit('message', ...args);

  get connected(): boolean {
    return this.opts.inner.connected;
  }

  get problem(): string | null {
    return this.opts.inner.problem ?? null;
  }

  get description(): string {
    return this.opts.inner.description;
  }

  connect(): void {
    const inner = this.opts.inner;
    inner.off('connect', this.onInnerConnect).off('close', this.onInnerClose).off('message', this.onInnerMessage);
    inner.on('connect', this.onInnerConnect);
    inner.on('close', this.onInnerClose);
    inner.on('message', this.onInnerMessage);
    inner.connect();
  }

  firstAttempt(): Promise<void> {
    return this.opts.inner.firstAttempt();
  }

  publish(topic: string, payload: string | Buffer, options: PublishOptions): Promise<void> {
    return new Promise((resolve, reject) => this.send(topic, payload, options, (err) => (err ? reject(err) : resolve())));
  }

  send(topic: string, payload: string | Buffer, options: PublishOptions, done: (err: BrokerError | null) => void): void {
    const topicClass = this.opts.classify(topic);
    if (topicClass === 'transaction') {
      // The outbox parks its own refused records; a refusal still counts, and explains a close.
      this.opts.inner.send(topic, payload, options, (err) => {
        if (err?.kind === 'refused') this.note(topic, topicClass, err);
        done(err);
      });
      return;
    }
    const size = typeof payload === 'string' ? Buffer.byteLength(payload) : payload.length;
    if (size > MAX_PAYLOAD_BYTES) {
      const err = new BrokerError('invalid', `payload of ${size} bytes is over the agent's limit of ${MAX_PAYLOAD_BYTES} for ${topicClass} messages`);
      this.note(topic, topicClass, err);
      return done(err);
    }
    const whole = options.retain ? this.classHold.get(topicClass) : undefined;
    if (whole && this.opts.clock.monotonic() < whole.due) {
      this.pending.set(topic, { payload, options });
      return done(new BrokerError('refused', `held: the broker refuses ${topicClass} topics (${whole.reason})`, whole.reasonCode ?? undefined));
    }
    const held = options.retain ? this.held.get(topic) : undefined;
    if (held && this.opts.clock.monotonic() < held.due && !(held.bytes !== null && size < held.bytes)) {
      this.pending.set(topic, { payload, options });
      return done(new BrokerError('refused', `held after the broker refused it: ${held.reason}`, held.reasonCode ?? undefined));
    }
    // Smaller than what was refused for its size: sent now, and newer than what waits for the retry.
    if (held) this.pending.delete(topic);
    if (this.suspects.has(topic)) {
      this.touched.add(topic);
      this.queue.push({ topic, payload, options, done });
      this.probeNext();
      return;
    }
    this.forward(topic, topicClass, payload, options, done);
  }

  /** The next suspect, alone: the only publish of its kind in flight, so a drop names it. */
  private probeNext(): void {
    if (this.probing !== null || this.inFlight.size > 0 || !this.connected) return;
    const next = this.queue.shift();
    if (!next) return;
    this.probing = next.topic;
    this.lastProbe = next;
    this.forward(next.topic, this.opts.classify(next.topic), next.payload, next.options, (err) => {
      if (this.probing === next.topic && err?.kind !== 'disconnected') {
        this.probing = null;
        this.suspects.delete(next.topic);
        if (this.suspects.size === 0) this.emit('settled');
      }
      next.done(err);
      this.probeNext();
    });
  }

  private forward(topic: string, topicClass: TopicClass, payload: string | Buffer, options: PublishOptions, done: (err: BrokerError | null) => void): void {
    this.inFlight.set(topic, (this.inFlight.get(topic) ?? 0) + 1);
    this.opts.inner.send(topic, payload, options, (err) => {
      const n = (this.inFlight.get(topic) ?? 1) - 1;
      if (n > 0) this.inFlight.set(topic, n);
      else this.inFlight.delete(topic);
      if (err === null) {
        this.accepted.set(topicClass, (this.accepted.get(topicClass) ?? 0) + 1);
        if (this.classHold.delete(topicClass)) this.release(topicClass);
        if (this.held.delete(topic)) {
          this.pending.delete(topic);
          if (this.logged.delete(topic)) this.opts.logger.info({ topic }, 'the broker accepts this topic again');
        }
      } else if (err.kind === 'disconnected') {
        // Only what every connect sends again can be found by sending it alone.
        if (options.retain) this.lostAtClose.add(topic);
      } else if (err.kind === 'refused') {
        this.note(topic, topicClass, err, false, options.smallerIfTooLarge);
        if (options.retain) this.hold(topic, topicClass, err, payload, options);
      } else if (tooLarge(err)) {
        // Over the Maximum Packet Size the broker announced, so never sent: it costs the
        // connection nothing, and says nothing of the class's smaller messages, which go on.
        this.note(topic, topicClass, err, false, options.smallerIfTooLarge);
        if (options.retain) this.hold(topic, topicClass, err, payload, options);
      }
      done(err);
      if (this.inFlight.size === 0) this.probeNext();
    });
  }

  /**
   * Counts a refusal, remembers it for the close that may follow, and logs it once per topic; not
   * a refusal for size of a payload whose publisher sends a smaller one at once (smallerIfTooLarge).
   */
  private note(topic: string, topicClass: TopicClass, err: BrokerError, dropped = false, smallerFollows = false): void {
    this.counts.set(topicClass, (this.counts.get(topicClass) ?? 0) + 1);
    this.opts.onRefusal?.(topicClass);
    this.lastRefusal = { topic, at: this.opts.clock.monotonic() };
    if (topicClass === 'transaction' || this.logged.has(topic)) return;
    if (smallerFollows && err.reasonCode === PACKET_TOO_LARGE) {
      this.opts.logger.debug({ topic, class: topicClass, reason: err.message }, 'refused as too large; its publisher sends a smaller form');
      return;
    }
    if (this.logged.size >= MAX_HELD) this.logged.clear();
    this.logged.add(topic);
    const reasonCode = err.reasonCode ?? null;
    this.opts.logger.warn(
      { topic, class: topicClass, reason: err.message, ...(reasonCode !== null ? { reasonCode: `0x${reasonCode.toString(16)}` } : {}), fix: hint(reasonCode, dropped) },
      'the broker refused a publish; everything else goes on',
    );
  }

  /**
   * Holds a refused retained topic. Two of a class refused by the broker and none taken hold them
   * all; a topic over the broker's packet size is refused by the agent and says nothing of its class.
   */
  private hold(topic: string, topicClass: TopicClass, err: BrokerError, payload: string | Buffer, options: PublishOptions): void {
    const before = this.held.get(topic);
    const refusals = (before?.refusals ?? 0) + 1;
    const wait = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** (refusals - 1));
    if (!before && this.held.size >= MAX_HELD) {
      const oldest = this.held.keys().next().value as string;
      this.held.delete(oldest);
      this.pending.delete(oldest);
    }
    const size = typeof payload === 'string' ? Buffer.byteLength(payload) : payload.length;
    const bytes = err.reasonCode === PACKET_TOO_LARGE ? Math.min(before?.bytes ?? Infinity, size) : null;
    this.held.set(topic, { topic, topicClass, reason: err.message, reasonCode: err.reasonCode ?? null, refusals, due: this.opts.clock.monotonic() + wait, bytes });
    if (!this.pending.has(topic)) this.pending.set(topic, { payload, options });
    const whole = this.classHold.get(topicClass);
    if (tooLarge(err)) {
      // Neither counted against a class held whole nor towards holding one.
    } else if (whole) {
      whole.refusals += 1;
      whole.due = this.opts.clock.monotonic() + Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** (whole.refusals - 1));
    } else if ((this.accepted.get(topicClass) ?? 0) === 0 && [...this.held.values()].filter((h) => h.topicClass === topicClass && h.reasonCode !== PACKET_TOO_LARGE).length >= 2) {
      this.classHold.set(topicClass, { reason: err.message, reasonCode: err.reasonCode ?? null, refusals: 1, due: this.opts.clock.monotonic() + FIRST_RETRY_MS });
      this.opts.logger.warn({ class: topicClass, reason: err.message }, 'the broker refuses every topic of this class so far: they are held together and one is tried again later');
    }
    this.schedule();
  }

  /** A class the broker takes again: what was kept aside goes out now. */
  private release(topicClass: TopicClass): void {
    for (const [topic, p] of [...this.pending]) {
      if (this.opts.classify(topic) !== topicClass) continue;
      this.pending.delete(topic);
      this.held.delete(topic);
      this.send(topic, p.payload, p.options, () => undefined);
    }
  }

  /** One timer, for the earliest held topic with something to send. */
  private schedule(): void {
    this.retryTimer?.cancel();
    this.retryTimer = null;
    if (!this.connected) return;
    let next = Infinity;
    for (const [topic, h] of this.held) if (this.pending.has(topic) && !this.classHold.has(h.topicClass)) next = Math.min(next, h.due);
    for (const [, c] of this.classHold) next = Math.min(next, c.due);
    if (next === Infinity) return;
    this.retryTimer = this.opts.clock.setTimeout(() => {
      this.retryTimer = null;
      const now = this.opts.clock.monotonic();
      for (const [topicClass, c] of this.classHold) {
        if (c.due > now) continue;
        // One topic of the class probes; the rest wait for its answer. A topic held for its own
        // size cannot answer for the class: the agent refuses it before the broker sees it.
        const probe = [...this.pending].find(([topic]) => this.opts.classify(topic) === topicClass && !this.heldForSize(topic, now));
        c.due = Infinity;
        if (!probe) {
          this.classHold.delete(topicClass);
          continue;
        }
        this.pending.delete(probe[0]);
        this.forward(probe[0], topicClass, probe[1].payload, probe[1].options, (err) => {
          if (err === null || (err.kind !== 'disconnected' && !tooLarge(err))) return;
          // Unanswered: another topic asks at once (the size-held one is skipped now).
          c.due = this.opts.clock.monotonic();
          if (tooLarge(err)) this.schedule();
        });
      }
      for (const [topic, h] of [...this.held]) {
        const p = this.pending.get(topic);
        if (!p || h.due > now || this.classHold.has(h.topicClass)) continue;
        this.pending.delete(topic);
        // Due: sent as is; a refusal holds it again for longer, an acknowledgement releases it.
        h.due = now;
        this.send(topic, p.payload, p.options, (err) => {
          if (err && err.kind !== 'refused') this.pending.set(topic, p);
        });
      }
      this.schedule();
    }, Math.max(0, next - this.opts.clock.monotonic()));
  }

  private heldForSize(topic: string, now: number): boolean {
    const h = this.held.get(topic);
    return h !== undefined && h.reasonCode === PACKET_TOO_LARGE && h.due > now;
  }

  /** Refusals so far by topic class, and the topics held now (at most 20, the most refused first). */
  refusals(): RefusalSummary {
    const byClass = Object.fromEntries(this.counts) as Partial<Record<TopicClass, number>>;
    const total = [...this.counts.values()].reduce((a, b) => a + b, 0);
    const wallOffset = this.opts.clock.now() - this.opts.clock.monotonic();
    const held = [...this.held.values()]
      .sort((a, b) => b.refusals - a.refusals)
      .slice(0, 20)
      .map(({ due, bytes: _bytes, ...h }) => ({ ...h, retryAt: due + wallOffset }));
    return { total, byClass, held };
  }

  settling(): boolean {
    return this.suspects.size > 0;
  }

  heldCount(): number {
    return this.held.size;
  }

  batch(fn: () => void): void {
    this.opts.inner.batch(fn);
  }

  subscribe(filter: string, options?: SubscribeOptions): Promise<void> {
    return this.opts.inner.subscribe(filter, options);
  }

  unsubscribe(filter: string): Promise<void> {
    return this.opts.inner.unsubscribe(filter);
  }

  receiveMaximum(): number {
    return this.opts.inner.receiveMaximum();
  }

  maximumPacketSize(): number | undefined {
    return this.opts.inner.maximumPacketSize();
  }

  end(timeoutMs: number): Promise<void> {
    this.retryTimer?.cancel();
    this.retryTimer = null;
    this.forgetTimer?.cancel();
    this.forgetTimer = null;
    const inner = this.opts.inner;
    return inner.end(timeoutMs).finally(() => {
      inner.off('connect', this.onInnerConnect).off('close', this.onInnerClose).off('message', this.onInnerMessage);
    });
  }
}

/** Refused by the adapter, unsent, for being over the broker's Maximum Packet Size. */
function tooLarge(err: BrokerError): boolean {
  return err.kind === 'invalid' && err.reasonCode === PACKET_TOO_LARGE;
}
