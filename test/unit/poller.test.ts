import { describe, expect, it } from 'vitest';
import { Poller } from '../../agent/vendor/poller.js';
import { ChairRegistry } from '../../agent/core/chair-registry.js';
import { Health } from '../../agent/observe/health.js';
import { silentLogger } from '../../agent/platform/logger.js';
import { VendorError } from '../../agent/vendor/errors.js';
import type { CallOptions, ChairList, VendorApi } from '../../agent/vendor/vendor-api.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { VendorClock } from '../../agent/time/vendor-clock.js';
import { formatVendorTime } from '../../agent/time/vendor-time.js';

/** A vendor whose list answers take `delayMs` of fake time, recording concurrency. */
class ScriptedVendor implements VendorApi {
  calls = 0;
  concurrent = 0;
  maxConcurrent = 0;
  delayMs = 0;
  fail: VendorError | null = null;
  serverTime: string | null = null;
  constructor(private readonly clock: FakeClock) {}
  async listChairs(options: CallOptions = {}): Promise<ChairList> {
    this.calls++;
    this.concurrent++;
    this.maxConcurrent = Math.max(this.maxConcurrent, this.concurrent);
    try {
      if (this.delayMs) await this.clock.sleep(this.delayMs, options.signal);
      if (this.fail) throw this.fail;
      return {
        chairs: Array.from({ length: 16 }, (_, i) => ({
          deviceId: `MC${i}`, deviceCode: null, deviceName: null, location: null, status: 'Available',
          seated: false, leftMin: null, leftSec: null, serverTime: this.serverTime, firmwareVersion: null,
        })),
        rejected: [],
      };
    } finally {
      this.concurrent--;
    }
  }
  chairStatus(): never { throw new Error('not used'); }
  listTransactions(): never { throw new Error('not used'); }
  control(): never { throw new Error('not used'); }
  async close(): Promise<void> {}
}

function setup(periodMs = 1000, maxRetryAfterMs = 300_000, timeZone = 'UTC') {
  const clock = new FakeClock();
  const vendor = new ScriptedVendor(clock);
  const registry = new ChairRegistry({ timeZone, availableStatuses: ['Available'], staleAfterMs: 3 * periodMs, forgetAfterMs: 3_600_000, expected: [] });
  const health = new Health(clock);
  const vendorClock = new VendorClock();
  const poller = new Poller({ vendor, registry, health, clock, vendorClock, logger: silentLogger(), periodMs, maxRetryAfterMs, timeZone });
  return { clock, vendor, registry, health, poller, vendorClock };
}

describe('poller', () => {
  it('makes one list request per period, however many chairs there are', async () => {
    const { clock, vendor, poller, registry } = setup(1000);
    poller.start();
    await clock.advance(10_000);
    await poller.stop();
    expect(vendor.calls).toBe(11); // at 0 s and every second through 10 s
    expect(registry.knownIds()).toHaveLength(16);
  });

  it('delays the next poll behind a slow answer instead of stacking requests', async () => {
    const { clock, vendor, poller } = setup(200);
    vendor.delayMs = 1500;
    poller.start();
    await clock.advance(6_000);
    await poller.stop();
    expect(vendor.maxConcurrent).toBe(1);
    expect(vendor.calls).toBe(5); // each poll takes 1.5 s: they start at 0, 1.5, 3, 4.5 and 6 s
  });

  it('turns chairs offline three periods after the last success even while a poll hangs', async () => {
    const { clock, vendor, poller, registry, health } = setup(1000);
    poller.start();
    await clock.advance(100);
    expect(registry.view('MC0')?.online).toBe(true);
    vendor.delayMs = 60_000; // the next poll hangs
    await clock.advance(2_800);
    expect(registry.view('MC0')?.online).toBe(true);
    await clock.advance(200);
    expect(registry.view('MC0')?.online).toBe(false);
    expect(health.get('vendor').ok).toBe(true); // no poll has failed yet, one is just slow
    await poller.stop();
  });

  it('reports a failing vendor in health and waits out a Retry-After longer than the period', async () => {
    const { clock, vendor, poller, health } = setup(1000);
    vendor.fail = new VendorError('VENDOR_HTTP_ERROR', 'vendor answered HTTP 429 to lists', { status: 429, retryable: true, retryAfterMs: 5000 });
    poller.start();
    await clock.advance(100);
    expect(health.get('vendor')).toMatchObject({ ok: false, detail: 'vendor answered HTTP 429 to lists' });
    await clock.advance(4_800);
    expect(vendor.calls).toBe(1);
    await clock.advance(200);
    expect(vendor.calls).toBe(2);
    await poller.stop();
  });

  it('honours Retry-After only up to vendor.maxRetryAfterSeconds: an hour-long one does not leave the buttons dead', async () => {
    const { clock, vendor, poller } = setup(1000, 60_000);
    vendor.fail = new VendorError('VENDOR_HTTP_ERROR', 'HTTP 429', { status: 429, retryable: true, retryAfterMs: 3_600_000 });
    poller.start();
    await clock.advance(59_000);
    expect(vendor.calls).toBe(1);
    vendor.fail = null;
    await clock.advance(1_100);
    expect(vendor.calls).toBe(2); // after the 60 s cap, not an hour
    await poller.stop();
  });

  it('a Retry-After too large for a timer (2,147,484 s) is capped, not turned into 1 ms: no request storm', async () => {
    const { clock, vendor, poller } = setup(1000, 300_000);
    vendor.fail = new VendorError('VENDOR_HTTP_ERROR', 'HTTP 429', { status: 429, retryable: true, retryAfterMs: 2_147_484 * 1000 });
    poller.start();
    await clock.advance(600_000);
    expect(vendor.calls).toBe(3); // at 0, 300 and 600 s
    await poller.stop();
  });

  it('never polls faster than the period, whatever Retry-After says', async () => {
    const { clock, vendor, poller } = setup(5000);
    vendor.fail = new VendorError('VENDOR_HTTP_ERROR', 'HTTP 503', { status: 503, retryable: true, retryAfterMs: 100 });
    poller.start();
    await clock.advance(20_000);
    expect(vendor.calls).toBe(5);
    await poller.stop();
  });

  it('a wall clock set back does not keep a failing list fresh: freshness runs on the monotonic clock', async () => {
    const { clock, vendor, poller, registry } = setup(1000);
    poller.start();
    await clock.advance(100);
    expect(registry.view('MC0')?.online).toBe(true);
    vendor.fail = new VendorError('VENDOR_UNREACHABLE', 'unreachable', { retryable: true });
    clock.jump(-180_000); // NTP sets the clock back three minutes
    await clock.advance(3_000);
    expect(registry.view('MC0')?.online).toBe(false);
    await poller.stop();
  });

  it('reports a clock that disagrees with the vendor, and a vendor speaking another zone', async () => {
    const { clock, vendor, poller, health } = setup(1000, 300_000, 'Asia/Bangkok');
    vendor.serverTime = formatVendorTime(clock.now() - 200_000, 'Asia/Bangkok'); // this box is 200 s ahead
    poller.start();
    await clock.advance(100);
    expect(health.get('clock').ok).toBe(false);
    expect(health.get('clock').detail).toMatch(/^this clock is 3 min 2\d s ahead of the vendor's ServerTime \(Asia\/Bangkok\): check time sync/);
    vendor.serverTime = formatVendorTime(clock.now() + 1000, 'UTC'); // the vendor writes UTC, the site says Bangkok
    await clock.advance(1000);
    expect(health.get('clock').detail).toMatch(/ServerTime, read in Asia\/Bangkok, is 7 h 00 min behind this clock: the vendor probably speaks another zone/);
    vendor.serverTime = formatVendorTime(clock.now() + 2000, 'Asia/Bangkok');
    await clock.advance(1000);
    expect(health.get('clock').ok).toBe(true);
    await poller.stop();
  });

  it('leaves no timer behind when stopped', async () => {
    const { clock, poller } = setup(1000);
    poller.start();
    await clock.advance(2500);
    await poller.stop();
    expect(clock.timerCount).toBe(0);
  });
});
