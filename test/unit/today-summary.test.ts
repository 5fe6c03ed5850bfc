import { EventEmitter } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { VendorClock } from '../../agent/time/vendor-clock.js';
import { silentLogger } from '../../agent/platform/logger.js';
import type { Broker } from '../../agent/mqtt/broker.js';
import { Outbox } from '../../agent/store/outbox.js';
import { addDecimal, formatDecimal, parseDecimal, ZERO } from '../../agent/summary/decimal.js';
import { DayTally } from '../../agent/summary/day-tally.js';
import { TodaySummary } from '../../agent/summary/today.js';
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

/** A connected broker that keeps what was published, in order. */
function recordingBroker(): { broker: Broker; published: { topic: string; payload: string; retain: boolean }[] } {
  const published: { topic: string; payload: string; retain: boolean }[] = [];
  const broker = Object.assign(new EventEmitter(), {
    connected: true,
    description: 'recording',
    publish: async (topic: string, payload: string | Buffer, opts: { retain?: boolean }) => void published.push({ topic, payload: payload.toString(), retain: opts.retain ?? false }),
  }) as unknown as Broker;
  return { broker, published };
}

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
    today = new TodaySummary({ source: outbox, broker, topic: 'chair-agent/s/summary', clock, vendorClock: new VendorClock(), timeZone: 'Asia/Bangkok', currency: 'THB', logger: silentLogger() });
    today.start();
    await settle(10);
    await clock.advance(1_000);
    expect(today.summary()).toMatchObject({ date: '2026-11-22', currency: 'THB', site: { uses: 1, takings: { promptpay: '40.00' } } });
    const first = published.at(-1)!;
    expect(first).toMatchObject({ topic: 'chair-agent/s/summary', retain: true });
    expect(JSON.parse(first.payload)).toMatchObject({ date: '2026-11-22', timeZone: 'Asia/Bangkok', startedAt: '2026-11-22T00:00:00+07:00', currency: 'THB', site: { uses: 1, total: '40.00' }, chairs: { MC7001: { uses: 1 } } });

    // A webhook's record: counted, and published within a second, once for a burst.
    await storeAll(outbox, [asRecord(vendorRecord({ TransactionId: 'T2', TransactionTime: '2026-11-22 11:59:00', Amount: '60.05', DeviceId: 'MC7002' }))], 'webhook', clock.now());
    await storeAll(outbox, [asRecord(vendorRecord({ TransactionId: 'T3', TransactionTime: '2026-11-22 11:59:30', Amount: '0.00', PaymentMethod: 'manual', DeviceId: 'MC7002' }))], 'webhook', clock.now());
    const before = published.length;
    await clock.advance(1_000);
    expect(published.length).toBe(before + 1);
    expect(JSON.parse(published.at(-1)!.payload)).toMatchObject({ site: { uses: 3, takings: { manual: '0.00', promptpay: '100.05' }, total: '100.05' } });

    // Midnight in Bangkok (17:00 UTC): a new day, empty, published.
    await clock.advance(12 * 3_600_000);
    await settle();
    await clock.advance(1_000);
    expect(JSON.parse(published.at(-1)!.payload)).toMatchObject({ date: '2026-11-23', startedAt: '2026-11-23T00:00:00+07:00', site: { uses: 0, total: '0.00' }, chairs: {} });
  });
});
