import { describe, expect, it } from 'vitest';
import { VendorClock } from '../../agent/time/vendor-clock.js';
import { StartCorrelation } from '../../agent/start/start-correlation.js';
import { asRecord } from '../helpers/records.js';
import { FakeClock } from '../helpers/fake-clock.js';

/** The vendor's clock reads 2026-11-22 12:00:00 now; records are stamped in its time. */
function setup(): { clock: FakeClock; pos: StartCorrelation; at: (offsetSeconds: number) => string } {
  const clock = new FakeClock();
  const vendor = new VendorClock();
  vendor.observe('2026-11-22 12:00:00', clock.monotonic(), clock.monotonic() + 1_000);
  const base = Date.UTC(2026, 10, 22, 12, 0, 0);
  const at = (s: number): string => new Date(base + s * 1000).toISOString().slice(0, 19).replace('T', ' ');
  return { clock, pos: new StartCorrelation(clock, vendor, 'Asia/Bangkok'), at };
}

const record = (deviceId: string, time: string | null, status = 'finished') =>
  asRecord({ TransactionId: `TX-${deviceId}-${time}`, Status: status, DeviceId: deviceId, TransactionTime: time, Amount: '40.00', PaymentMethod: 'promptpay' });

const tag = (note: string | null): string | null => (note === null ? null : (JSON.parse(note) as { transaction: string }).transaction);

describe('POS correlation: right or silent', () => {
  it("tags the run's own records, playing and finished", () => {
    const { pos, at } = setup();
    pos.starting('MC7001', 5, { source: 'mqtt', transaction: 'pos-A', minutes: 5 });
    expect(tag(pos.annotate(record('MC7001', at(2), 'playing')))).toBe('pos-A');
    expect(tag(pos.annotate(record('MC7001', at(2), 'finished')))).toBe('pos-A');
  });

  it('never tags a customer who paid at the same chair 16 s after the POS session finished', async () => {
    const { pos, at, clock } = setup();
    pos.starting('MC7001', 5, { source: 'mqtt', transaction: 'pos-A', minutes: 5 });
    await clock.advance(5 * 60_000 + 16_000);
    expect(pos.annotate(record('MC7001', at(5 * 60 + 16)))).toBeNull();
  });

  it("ties a late record to its own start, never to the chair's next one", async () => {
    const { pos, at, clock } = setup();
    pos.starting('MC7001', 1, { source: 'mqtt', transaction: 'pos-L1', minutes: 1 });
    await clock.advance(70_000);
    pos.starting('MC7001', 1, { source: 'mqtt', transaction: 'pos-L2', minutes: 1 });
    // L1's record arrives only now, stamped inside L1's run.
    expect(tag(pos.annotate(record('MC7001', at(3))))).toBe('pos-L1');
    expect(tag(pos.annotate(record('MC7001', at(72))))).toBe('pos-L2');
  });

  it('does not tag a record stamped a minute before the start, nor one without a time, nor another chair', () => {
    const { pos, at } = setup();
    pos.starting('MC7001', 5, { source: 'mqtt', transaction: 'pos-A', minutes: 5 });
    expect(pos.annotate(record('MC7001', at(-60)))).toBeNull();
    expect(pos.annotate(record('MC7001', null))).toBeNull();
    expect(pos.annotate(record('MC7002', at(2)))).toBeNull();
  });

  it('forgets a start the vendor refused', () => {
    const { pos, at } = setup();
    pos.starting('MC7001', 5, { source: 'mqtt', transaction: 'pos-A', minutes: 5 });
    pos.failed('MC7001');
    expect(pos.annotate(record('MC7001', at(2)))).toBeNull();
  });
});
