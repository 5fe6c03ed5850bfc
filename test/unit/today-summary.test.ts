import { EventEmitter } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { VendorClock } from '../../agent/time/vendor-clock.js';
import { silentLogger } from '../../agent/platform/logger.js';
import { BrokerError, type Broker } from '../../agent/mqtt/broker.js';
import { Outbox } from '../../agent/store/outbox.js';
import { addDecimal, formatDecimal, parseDecimal, ZERO } from '../../agent/summary/decimal.js';
import { DayTally } from '../../agent/summary/day-tally.js';
import { TodaySummary } from '../../agent/summary/today.js';
import { BrokerSizeLimit } from '../../agent/mqtt/size-limit.js';
import { FakeClock, settle } from '../helpers/fake-clock.js';
import { asRecord, vendorRecord, storeAll } from '../helpers/records.js';

describe('exact takings', () => {
  it('sums to the satang where floats drift', () => {
    let sum = ZERO;
    for (let i = 0; i < 3; i++) sum = addDecimal(sum, parseDecimal('0.10')!);
    expect(0.1 + 0.1 + 0.1).not.toBe(0.3);
    expect(formatDecimal(sum)).toBe('0.30');
    expect(formatDecimal(addDecimal(parseDecimal('120.00')!, parseDecimal('-20.5')!))).toBe('99.50');
    expect(formatDecimal(addDecimal(parseDecimal('0.005')!, parseDecimal('7')!))).toBe('7.005');
    expect(formatDecimal(addDecimal(parseDecimal('9007199254740993.00')!, parseDecimal('1.00')!))).toBe('9007199254740994.00');
  });

  it('reads only decimal text as an amount', () => {
    for (const bad of ['', ' ', '1e3', '12,00', '0x10', 'NaN', '1.2.3', '--1']) expect(parseDecimal(bad), bad).toBeNull();
  });
});

const rec = (id: string, over: Record<string, unknown>) => {
  const fields = vendorRecord({ TransactionId: id, TransactionTime: '2026-11-22 10:00:00', ...over });
  const r = asRecord(fields);
  return { r: { transactionId: r.transactionId, status: r.status, deviceId: r.deviceId, record: JSON.stringify(fields) }, fields };
};

describe('a day of uses', () => {
  it('keeps hostile payment methods from growing the summary: names cut, at most 16, the rest "other"', () => {
    const day = new DayTally('2026-11-22', 'Asia/Bangkok');
    const long = rec('L', { PaymentMethod: 'x'.repeat(70_000), Amount: '1.00' });
    day.add(long.r, long.fields);
    for (let i = 0; i < 40; i++) {
      const u = rec(`M${i}`, { PaymentMethod: `method-${i}`, Amount: '1.00' });
      day.add(u.r, u.fields);
    }
    const { takings } = day.summary().site;
    expect(Object.keys(takings)).toHaveLength(17);
    expect(Object.keys(takings)).toContain('x'.repeat(32));
    expect(takings['other']).toBe('25.00');
    expect(day.summary().site.total).toBe('41.00');
  });

  it('counts a use once, from its playing and its finished record, the later word winning', () => {
    const day = new DayTally('2026-11-22', 'Asia/Bangkok');
    const playing = rec('T1', { Status: 'playing', Amount: '40.00', PlayTime: '10' });
    const finished = rec('T1', { Status: 'finished', Amount: '40.00', PlayTime: '10' });
    expect(day.add(playing.r, playing.fields)).toBe(true);
    expect(day.add(finished.r, finished.fields)).toBe(true);
    expect(day.add(playing.r, playing.fields)).toBe(false);
    expect(day.summary().site).toEqual({ uses: 1, minutes: 10, takings: { promptpay: '40.00' }, total: '40.00', unreadAmounts: 0 });
  });

  it('splits takings by payment method, per chair and for the site', () => {
    const day = new DayTally('2026-11-22', 'Asia/Bangkok');
    const uses = [
      rec('A', { DeviceId: 'MC7001', Amount: '40.00', PaymentMethod: 'promptpay', PlayTime: '10' }),
      rec('B', { DeviceId: 'MC7001', Amount: '0.00', PaymentMethod: 'manual', PlayTime: '5' }),
      rec('C', { DeviceId: 'MC7002', Amount: '20.10', PaymentMethod: 'PromptPay', PlayTime: '5' }),
      rec('D', { DeviceId: 'MC7002', Amount: 'free', PaymentMethod: undefined, PlayTime: 'n/a' }),
    ];
    for (const u of uses) day.add(u.r, u.fields);
    const s = day.summary();
    expect(s.site).toEqual({ uses: 4, minutes: 20, takings: { manual: '0.00', promptpay: '60.10', unknown: '0.00' }, total: '60.10', unreadAmounts: 1 });
    expect(s.chairs['MC7001']).toEqual({ uses: 2, minutes: 15, takings: { manual: '0.00', promptpay: '40.00' }, total: '40.00' });
    expect(s.chairs['MC7002']).toEqual({ uses: 2, minutes: 5, takings: { promptpay: '20.10', unknown: '0.00' }, total: '20.10' });
  });
});

/**
 * A connected broker that keeps what was published, in order; with a size limit, it refuses a
 * larger payload as Mosquitto's message_size_limit does (PUBACK "Packet too large") and keeps it not.
 */
function recordingBroker(limit = Infinity, announced?: number): { broker: Broker; published: { topic: string; payload: string; retain: boolean }[]; refused: string[] } {
  const published: { topic: string; payload: string; retain: boolean }[] = [];
  const refused: string[] = [];
  const broker = Object.assign(new EventEmitter(), {
    connected: true,
    description: 'recording',
    maximumPacketSize: () => announced,
    publish: async (topic: string, payload: string | Buffer, opts: { retain?: boolean }) => {
      if (Buffer.byteLength(payload) > limit) {
        refused.push(topic);
        throw new BrokerError('refused', 'Publish error: Packet too large (reason code 0x95)', 0x95);
      }
      published.push({ topic, payload: payload.toString(), retain: opts.retain ?? false });
    },
  }) as unknown as Broker;
  return { broker, published, refused };
}

/** The chairs the site knows, as the registry tells them: a list may bring a chair (its first state) or let one go. */
function knownChairs(ids: string[]): { chairs: EventEmitter & { knownIds(): string[] }; list(next: string[]): void } {
  let known = ids;
  const chairs = Object.assign(new EventEmitter(), { knownIds: () => [...known] });
  const list = (next: string[]): void => {
    const before = known;
    known = next;
    for (const id of before) if (!next.includes(id)) chairs.emit('removed', id);
    for (const id of next) if (!before.includes(id)) chairs.emit('state', { deviceId: id });
  };
  return { chairs, list };
}

const dayOf = (published: { topic: string; payload: string }[], deviceId: string): Record<string, unknown> | undefined => {
  const last = published.filter((p) => p.topic === `chair-agent/s/chairs/${deviceId}/today`).at(-1);
  return last ? (JSON.parse(last.payload) as Record<string, unknown>) : undefined;
};

describe('today at a glance, from the records in the store', () => {
  let outbox: Outbox | null = null;
  let today: TodaySummary | null = null;
  afterEach(() => {
    today?.stop();
    outbox?.close();
  });

  it("counts the site's day from what the store holds, then each commit, and starts afresh at midnight", async () => {
    // 2026-11-22 12:00 in Bangkok.
    const clock = new FakeClock();
    outbox = new Outbox({ path: join(mkdtempSync(join(tmpdir(), 'today-')), 'agent.db') });
    outbox.open();
    const now = clock.now();
    // Other days' records before today's: read in slices, none counted.
    await storeAll(outbox, Array.from({ length: 4_500 }, () => asRecord(vendorRecord({ TransactionTime: '2026-11-21 12:00:00' }))), 'poll', now - 7_200_000);
    await storeAll(outbox, 
      [
        asRecord(vendorRecord({ TransactionId: 'Y1', TransactionTime: '2026-11-21 23:59:59', Amount: '99.00' })),
        asRecord(vendorRecord({ TransactionId: 'T1', TransactionTime: '2026-11-22 00:00:00', Amount: '40.00', DeviceId: 'MC7001' })),
        asRecord(vendorRecord({ TransactionId: 'T1', Status: 'finished', TransactionTime: '2026-11-22 00:00:00', Amount: '40.00', DeviceId: 'MC7001' })),
      ],
      'poll',
      now - 3_600_000,
    );
    const { broker, published } = recordingBroker();
    const { chairs } = knownChairs(['MC7001', 'MC7002', 'MC7003']);
    today = new TodaySummary({ source: outbox, broker, topic: 'chair-agent/s/summary', chairTopic: (id) => `chair-agent/s/chairs/${id}/today`, chairs, sizeLimit: new BrokerSizeLimit(broker), clock, vendorClock: new VendorClock(), timeZone: 'Asia/Bangkok', currency: 'THB', logger: silentLogger() });
    today.start();
    await settle(10);
    await clock.advance(1_000);
    expect(today.summary()).toMatchObject({ date: '2026-11-22', currency: 'THB', site: { uses: 1, takings: { promptpay: '40.00' } } });
    const first = published.find((p) => p.topic === 'chair-agent/s/summary')!;
    expect(first).toMatchObject({ topic: 'chair-agent/s/summary', retain: true });
    expect(JSON.parse(first.payload)).toMatchObject({ date: '2026-11-22', timeZone: 'Asia/Bangkok', startedAt: '2026-11-22T00:00:00+07:00', currency: 'THB', site: { uses: 1, total: '40.00' }, chairs: { MC7001: { uses: 1 } } });
    // Each chair the site knows has its day on its own topic, retained; one with no use shows 0.
    expect(published.filter((p) => p.topic.endsWith('/today')).every((p) => p.retain)).toBe(true);
    expect(dayOf(published, 'MC7001')).toMatchObject({ deviceId: 'MC7001', uses: 1, minutes: 5, takings: { promptpay: '40.00' }, total: '40.00', currency: 'THB' });
    expect(dayOf(published, 'MC7003')).toEqual({ deviceId: 'MC7003', date: '2026-11-22', startedAt: '2026-11-22T00:00:00+07:00', uses: 0, minutes: 0, takings: {}, total: '0.00', currency: 'THB' });

    // A webhook's record: counted, and published within a second, once for a burst.
    await storeAll(outbox, [asRecord(vendorRecord({ TransactionId: 'T2', TransactionTime: '2026-11-22 11:59:00', Amount: '60.05', DeviceId: 'MC7002' }))], 'webhook', clock.now());
    await storeAll(outbox, [asRecord(vendorRecord({ TransactionId: 'T3', TransactionTime: '2026-11-22 11:59:30', Amount: '0.00', PaymentMethod: 'manual', DeviceId: 'MC7002' }))], 'webhook', clock.now());
    const before = published.length;
    await clock.advance(1_000);
    // B/summary once for the burst, and the one chair whose day changed.
    expect(published.slice(before).map((p) => p.topic)).toEqual(['chair-agent/s/summary', 'chair-agent/s/chairs/MC7002/today']);
    expect(JSON.parse(published.at(-2)!.payload)).toMatchObject({ site: { uses: 3, takings: { manual: '0.00', promptpay: '100.05' }, total: '100.05' } });
    expect(dayOf(published, 'MC7002')).toEqual({ deviceId: 'MC7002', date: '2026-11-22', startedAt: '2026-11-22T00:00:00+07:00', uses: 2, minutes: 10, takings: { manual: '0.00', promptpay: '60.05' }, total: '60.05', currency: 'THB' });

    // Midnight in Bangkok (17:00 UTC): a new day, empty, published, and every chair's day back to 0.
    await clock.advance(12 * 3_600_000);
    await settle();
    await clock.advance(1_000);
    const summaries = published.filter((p) => p.topic === 'chair-agent/s/summary');
    expect(JSON.parse(summaries.at(-1)!.payload)).toMatchObject({ date: '2026-11-23', startedAt: '2026-11-23T00:00:00+07:00', site: { uses: 0, total: '0.00' }, chairs: {} });
    for (const id of ['MC7001', 'MC7002', 'MC7003']) expect(dayOf(published, id)).toMatchObject({ date: '2026-11-23', startedAt: '2026-11-23T00:00:00+07:00', uses: 0, minutes: 0, total: '0.00' });
  });

  it('gives a chair its day when a list brings it, and each chair again after a reconnect, however many there are', async () => {
    const clock = new FakeClock();
    outbox = new Outbox({ path: join(mkdtempSync(join(tmpdir(), 'today-')), 'agent.db') });
    outbox.open();
    // A hall of 300 chairs, each with a use today: B/summary must leave its chairs out, their own topics not.
    const ids = Array.from({ length: 300 }, (_, i) => `MC${String(7001 + i)}`);
    await storeAll(outbox, ids.map((id, i) => asRecord(vendorRecord({ TransactionId: `T${i}`, TransactionTime: '2026-11-22 10:00:00', Amount: '40.00', PlayTime: '10', DeviceId: id }))), 'poll', clock.now() - 3_600_000);
    const { broker, published } = recordingBroker();
    const { chairs, list } = knownChairs(ids);
    today = new TodaySummary({ source: outbox, broker, topic: 'chair-agent/s/summary', chairTopic: (id) => `chair-agent/s/chairs/${id}/today`, chairs, sizeLimit: new BrokerSizeLimit(broker), clock, vendorClock: new VendorClock(), timeZone: 'Asia/Bangkok', logger: silentLogger() });
    today.start();
    await settle(10);
    await clock.advance(1_000);
    const summary = JSON.parse(published.find((p) => p.topic === 'chair-agent/s/summary')!.payload) as Record<string, unknown>;
    expect(summary).toMatchObject({ site: { uses: 300 }, chairs: {}, chairsOmitted: 300 });
    for (const id of ids) expect(dayOf(published, id)).toMatchObject({ deviceId: id, uses: 1, minutes: 10, total: '40.00' });
    expect(dayOf(published, 'MC7001')).not.toHaveProperty('currency');

    // A list brings a chair: its day (0) within a second; nothing else is sent again.
    const before = published.length;
    list([...ids, 'MC9999']);
    await clock.advance(1_000);
    expect(published.slice(before).map((p) => p.topic)).toEqual(['chair-agent/s/chairs/MC9999/today']);
    expect(dayOf(published, 'MC9999')).toMatchObject({ uses: 0, total: '0.00' });

    // A list lets it go (the bridge clears its topics) and the next brings it back within the second: its day again.
    const gone = published.length;
    list(ids);
    list([...ids, 'MC9999']);
    await clock.advance(1_000);
    expect(published.slice(gone).map((p) => p.topic)).toEqual(['chair-agent/s/chairs/MC9999/today']);

    // A reconnect: the broker may have lost what it retained, so every chair's day is sent again.
    const beforeConnect = published.length;
    broker.emit('connect');
    expect(published.slice(beforeConnect).filter((p) => p.topic.endsWith('/today'))).toHaveLength(301);
  });

  it("leaves B/summary's chairs out once the broker refused it as too large, and keeps each chair's day", async () => {
    const clock = new FakeClock();
    outbox = new Outbox({ path: join(mkdtempSync(join(tmpdir(), 'today-')), 'agent.db') });
    outbox.open();
    const ids = Array.from({ length: 20 }, (_, i) => `MC${String(7001 + i)}`);
    await storeAll(outbox, ids.map((id, i) => asRecord(vendorRecord({ TransactionId: `T${i}`, TransactionTime: '2026-11-22 10:00:00', Amount: '40.00', DeviceId: id }))), 'poll', clock.now() - 3_600_000);
    // A site broker with message_size_limit 1024: twenty chairs' figures are larger.
    const { broker, published, refused } = recordingBroker(1_024);
    const { chairs } = knownChairs(ids);
    today = new TodaySummary({ source: outbox, broker, topic: 'chair-agent/s/summary', chairTopic: (id) => `chair-agent/s/chairs/${id}/today`, chairs, sizeLimit: new BrokerSizeLimit(broker), clock, vendorClock: new VendorClock(), timeZone: 'Asia/Bangkok', logger: silentLogger() });
    today.start();
    await settle(10);
    await clock.advance(1_000);
    expect(refused).toEqual(['chair-agent/s/summary']);
    await clock.advance(1_000);
    const summaries = () => published.filter((p) => p.topic === 'chair-agent/s/summary').map((p) => JSON.parse(p.payload) as Record<string, unknown>);
    expect(summaries()).toEqual([expect.objectContaining({ site: expect.objectContaining({ uses: 20, total: '800.00' }), chairs: {}, chairsOmitted: 20 })]);
    for (const id of ids) expect(dayOf(published, id)).toMatchObject({ uses: 1, total: '40.00' });

    // The next use: the summary goes out without its chairs at once, with no second refusal.
    await storeAll(outbox, [asRecord(vendorRecord({ TransactionId: 'T20', TransactionTime: '2026-11-22 11:00:00', Amount: '40.00', DeviceId: 'MC7001' }))], 'webhook', clock.now());
    await clock.advance(1_000);
    expect(refused).toHaveLength(1);
    expect(summaries().at(-1)).toMatchObject({ site: { uses: 21 }, chairsOmitted: 20 });
    expect(dayOf(published, 'MC7001')).toMatchObject({ uses: 2, total: '80.00' });
  });

  it('leaves the chairs out at once under the Maximum Packet Size a broker announces (Mosquitto max_packet_size)', async () => {
    const clock = new FakeClock();
    outbox = new Outbox({ path: join(mkdtempSync(join(tmpdir(), 'today-')), 'agent.db') });
    outbox.open();
    const ids = Array.from({ length: 20 }, (_, i) => `MC${String(7001 + i)}`);
    await storeAll(outbox, ids.map((id, i) => asRecord(vendorRecord({ TransactionId: `T${i}`, TransactionTime: '2026-11-22 10:00:00', Amount: '40.00', DeviceId: id }))), 'poll', clock.now() - 3_600_000);
    // Told in the CONNACK: a packet over it would cost the connection, so none is sent to learn it.
    const { broker, published, refused } = recordingBroker(Infinity, 1_024);
    today = new TodaySummary({ source: outbox, broker, topic: 'chair-agent/s/summary', chairTopic: (id) => `chair-agent/s/chairs/${id}/today`, chairs: knownChairs(ids).chairs, sizeLimit: new BrokerSizeLimit(broker), clock, vendorClock: new VendorClock(), timeZone: 'Asia/Bangkok', logger: silentLogger() });
    today.start();
    await settle(10);
    await clock.advance(1_000);
    expect(refused).toEqual([]);
    expect(published.filter((p) => p.topic === 'chair-agent/s/summary').map((p) => JSON.parse(p.payload) as Record<string, unknown>)).toEqual([expect.objectContaining({ site: expect.objectContaining({ uses: 20 }), chairsOmitted: 20 })]);
  });
});
