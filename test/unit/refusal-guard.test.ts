import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { silentLogger, type Logger } from '../../agent/platform/logger.js';
import { BrokerError, type Broker, type BrokerEvents, type CloseInfo, type PublishOptions } from '../../agent/mqtt/broker.js';
import { MAX_PAYLOAD_BYTES, RefusalGuard } from '../../agent/mqtt/refusal-guard.js';
import { Topics } from '../../agent/mqtt/topics.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { memoryLogger } from '../helpers/memory-logger.js';

/** A broker whose answers the test gives: each publish waits until answered or the link drops. */
class ScriptedBroker extends EventEmitter<BrokerEvents> implements Broker {
  connected = false;
  readonly description = 'scripted';
  readonly sent: { topic: string; payload: string; done: (err: BrokerError | null) => void }[] = [];
  /** Closes the guard said were for a publish. */
  closesForPublish = 0;

  connect(): void {
    this.up();
  }
  up(): void {
    this.connected = true;
    this.emit('connect');
  }
  /** The broker drops the link: what was in flight fails first, then the close. */
  drop(): void {
    this.connected = false;
    for (const s of this.sent.splice(0)) s.done(new BrokerError('disconnected', 'gone'));
    this.emit('close');
  }
  answer(topic: string, err: BrokerError | null = null): void {
    const i = this.sent.findIndex((s) => s.topic === topic);
    const [s] = this.sent.splice(i, 1);
    s?.done(err);
  }
  firstAttempt(): Promise<void> {
    return Promise.resolve();
  }
  publish(topic: string, payload: string | Buffer, options: PublishOptions): Promise<void> {
    return new Promise((resolve, reject) => this.send(topic, payload, options, (e) => (e ? reject(e) : resolve())));
  }
  send(topic: string, payload: string | Buffer, _o: PublishOptions, done: (err: BrokerError | null) => void): void {
    if (!this.connected) return done(new BrokerError('disconnected', 'not connected'));
    this.sent.push({ topic, payload: payload.toString(), done });
  }
  batch(fn: () => void): void {
    fn();
  }
  subscribe(): Promise<void> {
    return Promise.resolve();
  }
  unsubscribe(): Promise<void> {
    return Promise.resolve();
  }
  receiveMaximum(): number {
    return 100;
  }
  maximumPacketSize(): number | undefined {
    return undefined;
  }
  end(): Promise<void> {
    return Promise.resolve();
  }
  closedForPublish(): void {
    this.closesForPublish += 1;
  }
}

const topics = new Topics('chair-agent', 'site');
const RETAINED: PublishOptions = { qos: 1, retain: true };
const NOT_AUTHORIZED = new BrokerError('refused', 'Publish error: Not authorized (reason code 0x87)', 0x87);
/** What the MQTT adapter answers, unsent, for a packet over the broker's Maximum Packet Size. */
const TOO_LARGE = new BrokerError('invalid', "larger than the broker's maximum packet size (700 bytes)", 0x95);

function setup(logger: Logger = silentLogger()): { inner: ScriptedBroker; guard: RefusalGuard; clock: FakeClock; closes: (CloseInfo | undefined)[]; results: Map<string, string[]> } {
  const inner = new ScriptedBroker();
  const clock = new FakeClock();
  const guard = new RefusalGuard({ inner, classify: (t) => topics.classify(t, 'homeassistant'), clock, logger });
  const closes: (CloseInfo | undefined)[] = [];
  guard.on('close', (info) => closes.push(info));
  guard.connect();
  return { inner, guard, clock, closes, results: new Map() };
}

/** Publishes through the guard and records how each publish ended. */
function publish(guard: RefusalGuard, results: Map<string, string[]>, topic: string, payload = '{}', options = RETAINED): void {
  guard.send(topic, payload, options, (err) => results.set(topic, [...(results.get(topic) ?? []), err ? err.kind : 'ok']));
}

const configs = ['homeassistant/sensor/x/a/config', 'homeassistant/sensor/x/b/config', 'homeassistant/sensor/x/c/config'];

/** The broker refuses the first two discovery configs, so the class is held; the third waits. */
function holdDiscoveryClass(inner: ScriptedBroker, guard: RefusalGuard, results: Map<string, string[]>): void {
  for (const t of configs.slice(0, 2)) {
    publish(guard, results, t);
    inner.answer(t, NOT_AUTHORIZED);
  }
  publish(guard, results, configs[2] as string);
}

describe('RefusalGuard: what the broker refuses never costs the rest', () => {
  it('holds a refused retained topic: later publishes of it wait, the latest goes at the retry, an acknowledgement releases it', async () => {
    const { inner, guard, clock, results } = setup();
    const chair = topics.chair('MC7002');
    publish(guard, results, chair, '{"v":1}');
    inner.answer(chair, NOT_AUTHORIZED);
    expect(guard.refusals()).toMatchObject({ total: 1, byClass: { chair: 1 }, held: [{ topic: chair, topicClass: 'chair', refusals: 1 }] });
    // Every connect republishes it: it is kept aside, not sent.
    publish(guard, results, chair, '{"v":2}');
    publish(guard, results, chair, '{"v":3}');
    expect(inner.sent).toHaveLength(0);
    expect(results.get(chair)).toEqual(['refused', 'refused', 'refused']);
    // Other topics flow meanwhile.
    publish(guard, results, topics.chair('MC7001'));
    expect(inner.sent.map((s) => s.topic)).toEqual([topics.chair('MC7001')]);
    inner.answer(topics.chair('MC7001'));
    // At the retry (1 min), the latest payload goes; refused again, the next wait doubles.
    await clock.advance(60_000);
    expect(inner.sent.map((s) => `${s.topic} ${s.payload}`)).toEqual([`${chair} {"v":3}`]);
    inner.answer(chair, NOT_AUTHORIZED);
    expect(guard.refusals().held[0]?.refusals).toBe(2);
    await clock.advance(60_000);
    expect(inner.sent).toHaveLength(0);
    publish(guard, results, chair, '{"v":4}');
    await clock.advance(60_000);
    expect(inner.sent.map((s) => s.payload)).toEqual(['{"v":4}']);
    inner.answer(chair);
    expect(guard.refusals().held).toEqual([]);
    publish(guard, results, chair, '{"v":5}');
    expect(inner.sent.map((s) => s.payload)).toEqual(['{"v":5}']);
  });

  it('a wall clock stepped back 3 h while a topic is held: it is still tried at its retry, and the retry is shown on the wall clock', async () => {
    const { inner, guard, clock, results } = setup();
    const chair = topics.chair('MC7002');
    publish(guard, results, chair, '{"v":1}');
    inner.answer(chair, NOT_AUTHORIZED);
    expect(guard.refusals().held[0]?.retryAt).toBe(clock.now() + 60_000);
    clock.jump(-3 * 3_600_000); // NTP's step on a box whose clock ran ahead
    expect(guard.refusals().held[0]?.retryAt).toBe(clock.now() + 60_000);
    publish(guard, results, chair, '{"v":2}');
    await clock.advance(60_000);
    expect(inner.sent.map((s) => `${s.topic} ${s.payload}`)).toEqual([`${chair} {"v":2}`]);
  });

  it('puts a close that follows a refusal down to it, so no transaction in flight is blamed', () => {
    const { inner, guard, closes, results } = setup();
    publish(guard, results, topics.transaction('MC7001'), '{}', { qos: 1 });
    publish(guard, results, topics.availability('MC7002'));
    inner.answer(topics.availability('MC7002'), NOT_AUTHORIZED);
    inner.drop();
    expect(closes.at(-1)).toEqual({ cause: topics.availability('MC7002'), othersInFlight: false });
  });

  it('tells the adapter which closes were for a publish, and no other: those say nothing of a client id clash', () => {
    const { inner, guard, results } = setup();
    const [a, b] = [topics.chair('MC7001'), topics.chair('MC7002')];
    publish(guard, results, a);
    inner.answer(a, NOT_AUTHORIZED);
    inner.drop();
    expect(inner.closesForPublish).toBe(1);
    // A drop with no refusal and nothing alone in flight is not put down to a publish...
    inner.up();
    publish(guard, results, b);
    publish(guard, results, topics.bridgeInfo);
    inner.drop();
    expect(inner.closesForPublish).toBe(1);
    // ...nor is the first with a suspect alone in flight, but the second, which holds it, is.
    inner.up();
    publish(guard, results, b);
    inner.drop();
    expect(inner.closesForPublish).toBe(1);
    inner.up();
    publish(guard, results, b);
    inner.drop();
    expect(guard.refusals().held.map((h) => h.topic)).toEqual([a, b]);
    expect(inner.closesForPublish).toBe(2);
    // Nor is one with nothing in flight.
    inner.up();
    publish(guard, results, topics.bridgeInfo);
    inner.answer(topics.bridgeInfo);
    inner.drop();
    expect(inner.closesForPublish).toBe(2);
  });

  it('finds the topic the broker drops the connection on without a word: suspects go alone, two drops hold it', () => {
    const { inner, guard, closes, results } = setup();
    const [a, b, c] = [topics.bridgeInfo, topics.chair('MC7001'), topics.chair('MC7002')];
    for (const t of [a, b, c]) publish(guard, results, t);
    inner.drop();
    expect(closes.at(-1)).toEqual({ cause: null, othersInFlight: true });
    // Next connect: the three are suspects and go one at a time.
    inner.up();
    for (const t of [a, b, c]) publish(guard, results, t);
    expect(inner.sent.map((s) => s.topic)).toEqual([a]);
    inner.answer(a);
    expect(inner.sent.map((s) => s.topic)).toEqual([b]);
    inner.answer(b);
    expect(inner.sent.map((s) => s.topic)).toEqual([c]);
    inner.drop();
    expect(closes.at(-1)).toEqual({ cause: c, othersInFlight: true });
    inner.up();
    publish(guard, results, c);
    inner.drop();
    // Alone in flight at two drops: held, and said to be the cause.
    expect(guard.refusals().held.map((h) => h.topic)).toEqual([c]);
    inner.up();
    publish(guard, results, c);
    publish(guard, results, a);
    expect(inner.sent.map((s) => s.topic)).toEqual([a]);
  });

  it('holds a whole class the broker has never taken one of, and probes it with one topic', async () => {
    const { inner, guard, clock, results } = setup();
    holdDiscoveryClass(inner, guard, results);
    expect(inner.sent).toHaveLength(0);
    await clock.advance(60_000);
    // One probe, not three.
    expect(inner.sent).toHaveLength(1);
    inner.answer(inner.sent[0]?.topic as string);
    // Taken: the class is released, and what waited goes out.
    expect(inner.sent.map((s) => s.topic).sort()).toEqual(configs.filter((t) => t !== configs[0]).sort());
  });

  it('asks again with another topic at once when the probe of a held class is too large to send', async () => {
    const { inner, clock, guard, results } = setup();
    holdDiscoveryClass(inner, guard, results);
    await clock.advance(60_000);
    expect(inner.sent.map((s) => s.topic)).toEqual([configs[0]]);
    // Refused by the agent for its size: the broker was never asked, so the next topic asks now,
    // not after a doubled wait.
    inner.answer(configs[0] as string, TOO_LARGE);
    await clock.advance(0);
    expect(inner.sent.map((s) => s.topic)).toEqual([configs[1]]);
    inner.answer(configs[1] as string, TOO_LARGE);
    await clock.advance(0);
    expect(inner.sent.map((s) => s.topic)).toEqual([configs[2]]);
    inner.answer(configs[2] as string);
    // Taken: the class is released, and what waited goes to the adapter, which measures it again.
    expect(inner.sent.map((s) => s.topic).sort()).toEqual(configs.slice(0, 2));
  });

  it('does not hold a class on one broker refusal and one topic too large to send', () => {
    const { inner, guard, results } = setup();
    publish(guard, results, configs[0] as string);
    inner.answer(configs[0] as string, TOO_LARGE);
    publish(guard, results, configs[1] as string);
    inner.answer(configs[1] as string, NOT_AUTHORIZED);
    publish(guard, results, configs[2] as string);
    expect(inner.sent.map((s) => s.topic)).toEqual([configs[2]]);
  });

  it('lets a smaller payload through a topic held for its size at once, and keeps a larger one aside', async () => {
    const { inner, guard, clock, results } = setup();
    const summary = topics.summary;
    // Mosquitto's message_size_limit: PUBACK "Packet too large" for a summary of 3,000 bytes.
    publish(guard, results, summary, 'x'.repeat(3_000));
    inner.answer(summary, new BrokerError('refused', 'Publish error: Packet too large (reason code 0x95)', 0x95));
    expect(guard.heldCount()).toBe(1);
    // As large or larger: kept aside for the retry.
    publish(guard, results, summary, 'y'.repeat(3_000));
    expect(inner.sent).toHaveLength(0);
    // Smaller, and still refused: held at that size now.
    publish(guard, results, summary, 'z'.repeat(2_500));
    expect(inner.sent.map((s) => s.payload.length)).toEqual([2_500]);
    inner.answer(summary, new BrokerError('refused', 'Publish error: Packet too large (reason code 0x95)', 0x95));
    publish(guard, results, summary, 'w'.repeat(2_600));
    expect(inner.sent).toHaveLength(0);
    // Smaller again (it left its detail out): sent at once, taken, and the topic is released; the
    // larger one kept aside is older and is not sent after it.
    publish(guard, results, summary, '{"site":{}}');
    expect(inner.sent.map((s) => s.payload)).toEqual(['{"site":{}}']);
    inner.answer(summary);
    expect(guard.heldCount()).toBe(0);
    await clock.advance(3_600_000);
    expect(inner.sent).toHaveLength(0);
    // A topic held for anything but its size (an ACL) holds every payload, however small.
    const chair = topics.chair('MC7002');
    publish(guard, results, chair, 'x'.repeat(3_000));
    inner.answer(chair, NOT_AUTHORIZED);
    publish(guard, results, chair, '{}');
    expect(inner.sent).toHaveLength(0);
    expect(results.get(chair)).toEqual(['refused', 'refused']);
  });

  it('counts without a warning a refusal for size of a payload whose publisher sends a smaller one; warns of that one refused', () => {
    const { logger, lines } = memoryLogger();
    const { inner, guard } = setup(logger);
    const config = 'homeassistant/sensor/x/remaining/config';
    const tooLarge = new BrokerError('refused', 'Publish error: Packet too large (reason code 0x95)', 0x95);
    guard.send(config, 'x'.repeat(1_100), { ...RETAINED, smallerIfTooLarge: true }, () => undefined);
    inner.answer(config, tooLarge);
    expect(guard.refusals()).toMatchObject({ total: 1, byClass: { discovery: 1 } });
    expect(lines.filter((l) => l.level === 'warn')).toEqual([]);
    // The short form, taken: the topic is released with nothing said either.
    guard.send(config, 'x'.repeat(900), RETAINED, () => undefined);
    inner.answer(config);
    expect(guard.heldCount()).toBe(0);
    expect(lines).toEqual([]);
    // The smaller one refused too: that is warned of, and its release said.
    guard.send(config, 'x'.repeat(1_100), { ...RETAINED, smallerIfTooLarge: true }, () => undefined);
    inner.answer(config, tooLarge);
    guard.send(config, 'x'.repeat(1_000), RETAINED, () => undefined);
    inner.answer(config, tooLarge);
    expect(lines.map((l) => l.msg)).toEqual(['the broker refused a publish; everything else goes on']);
    guard.send(config, 'x'.repeat(800), RETAINED, () => undefined);
    inner.answer(config);
    expect(lines.map((l) => l.msg)).toEqual(['the broker refused a publish; everything else goes on', 'the broker accepts this topic again']);
  });

  it('lets no smaller payload through when the refusal for size cost the connection (Mosquitto with max_queued_messages 0)', () => {
    const { inner, guard, results } = setup();
    const state = topics.chair('MC7001');
    publish(guard, results, state, 'x'.repeat(3_000));
    inner.answer(state, new BrokerError('refused', 'Publish error: Packet too large (reason code 0x95)', 0x95));
    inner.drop();
    inner.up();
    // A state a byte smaller, and still too large, would cost the connection again: kept aside.
    publish(guard, results, state, 'x'.repeat(2_999));
    expect(inner.sent).toHaveLength(0);
    expect(results.get(state)).toEqual(['refused', 'refused']);
  });

  it('does not send a payload past its bound, except a transaction record', () => {
    const { inner, guard, results } = setup();
    publish(guard, results, topics.chair('HUGE'), 'x'.repeat(MAX_PAYLOAD_BYTES + 1));
    expect(results.get(topics.chair('HUGE'))).toEqual(['invalid']);
    publish(guard, results, topics.transaction('HUGE'), 'x'.repeat(MAX_PAYLOAD_BYTES + 1), { qos: 1 });
    expect(inner.sent.map((s) => s.topic)).toEqual([topics.transaction('HUGE')]);
  });
});
