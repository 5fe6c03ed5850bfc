import { describe, expect, it } from 'vitest';
import { formatIsoWithOffset, formatVendorTime, parseVendorTime, vendorTimeToIso } from '../../agent/time/vendor-time.js';

describe('vendor times', () => {
  it('reads a vendor time in the site zone and publishes it with the offset', () => {
    expect(vendorTimeToIso('2026-11-22 14:03:05', 'Asia/Bangkok')).toBe('2026-11-22T14:03:05+07:00');
    expect(parseVendorTime('2026-11-22 14:03:05', 'Asia/Bangkok')).toBe(Date.UTC(2026, 10, 22, 7, 3, 5));
  });

  it('follows daylight saving time in zones that have it', () => {
    expect(vendorTimeToIso('2026-07-01 12:00:00', 'Europe/Berlin')).toBe('2026-07-01T12:00:00+02:00');
    expect(vendorTimeToIso('2026-01-01 12:00:00', 'Europe/Berlin')).toBe('2026-01-01T12:00:00+01:00');
    expect(vendorTimeToIso('2026-03-01 09:30:00', 'America/St_Johns')).toBe('2026-03-01T09:30:00-03:30');
  });

  it('round-trips an instant through the vendor format', () => {
    const t = Date.UTC(2026, 0, 31, 23, 59, 59);
    expect(parseVendorTime(formatVendorTime(t, 'Asia/Bangkok'), 'Asia/Bangkok')).toBe(t);
    expect(formatIsoWithOffset(t, 'UTC')).toBe('2026-01-31T23:59:59+00:00');
  });

  it('gives null for text that is not a vendor time', () => {
    expect(vendorTimeToIso('yesterday', 'Asia/Bangkok')).toBeNull();
    expect(vendorTimeToIso('2026-13-01 00:00:00', 'Asia/Bangkok')).toBeNull();
  });
});
