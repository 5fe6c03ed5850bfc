import { describe, expect, it } from 'vitest';
import { chairStateFrom, remainingSeconds, sameChairState } from '../../agent/core/chair-state.js';
import { parseChairList, parseChairStatus, readNumberish } from '../../agent/vendor/parse.js';
import type { ChairReading } from '../../agent/vendor/vendor-api.js';

const opts = { timeZone: 'Asia/Bangkok', availableStatuses: ['Available'] };

function reading(over: Partial<ChairReading> = {}): ChairReading {
  return {
    deviceId: 'MC7001',
    deviceCode: 'C01',
    deviceName: 'Chair 1',
    location: 'Mall',
    status: 'Available',
    seated: false,
    leftMin: null,
    leftSec: null,
    serverTime: '2026-11-22 14:00:00',
    firmwareVersion: '01.02.03',
    ...over,
  };
}

describe('chair state', () => {
  it('reads LeftMin/LeftSec as minutes and seconds, or as a total when LeftSec already is one', () => {
    expect(remainingSeconds(null, null)).toBeNull();
    expect(remainingSeconds(4, 30)).toBe(270);
    expect(remainingSeconds(4, 270)).toBe(270);
    expect(remainingSeconds(0, 45)).toBe(45);
    expect(remainingSeconds(2, null)).toBe(120);
    expect(remainingSeconds(null, 75)).toBe(75);
  });

  it('accepts numbers and numeric strings for LeftMin and LeftSec', () => {
    expect(readNumberish('4')).toBe(4);
    expect(readNumberish(' 12 ')).toBe(12);
    expect(readNumberish(7)).toBe(7);
    expect(readNumberish('soon')).toBeNull();
    expect(readNumberish(null)).toBeNull();
  });

  it('is running while time remains, and only an available status with no session is startable', () => {
    const running = chairStateFrom(reading({ status: 'Running', leftMin: 3, leftSec: 5 }), opts);
    expect(running).toMatchObject({ running: true, remainingSeconds: 185, startable: false, status: 'Running' });
    const idle = chairStateFrom(reading(), opts);
    expect(idle).toMatchObject({ running: false, remainingSeconds: null, startable: true, serverTime: '2026-11-22T14:00:00+07:00' });
  });

  it('passes an unknown Status through verbatim and does not offer it for a start', () => {
    const s = chairStateFrom(reading({ status: 'Maintenance' }), opts);
    expect(s.status).toBe('Maintenance');
    expect(s.startable).toBe(false);
  });

  it('does not count a new server time as a change', () => {
    const a = chairStateFrom(reading(), opts);
    const b = chairStateFrom(reading({ serverTime: '2026-11-22 14:00:05' }), opts);
    const c = chairStateFrom(reading({ seated: true }), opts);
    expect(sameChairState(a, b)).toBe(true);
    expect(sameChairState(a, c)).toBe(false);
  });

  it('parses the list tolerantly: extra fields ignored, broken entries left out and reported', () => {
    const list = parseChairList([
      { DeviceId: 'A', DeviceCode: 'C1', Extra: { x: 1 }, data: { Status: 'Available', Seated: false, LeftMin: '2', LeftSec: '10', Temperature: 30 } },
      { DeviceId: 'B' },
      'nonsense',
      { DeviceId: 'C', data: { Status: 'Busy', Seated: 'true', LeftMin: null, LeftSec: null } },
    ]);
    expect(list.chairs.map((c) => c.deviceId)).toEqual(['A', 'C']);
    expect(list.chairs[0]).toMatchObject({ leftMin: 2, leftSec: 10, deviceCode: 'C1' });
    expect(list.chairs[1]).toMatchObject({ status: 'Busy', seated: true });
    expect(list.rejected).toEqual(['chair B has no data object', 'element 2 is not an object']);
  });

  it('reads the flat status body', () => {
    const r = parseChairStatus({ DeviceId: 'A', Status: 'Available', Seated: true, LeftMin: null, LeftSec: null, ServerTime: 'x', FirmwareVersion: '1' }, 'A');
    expect(r).toMatchObject({ deviceId: 'A', status: 'Available', seated: true, firmwareVersion: '1' });
  });
});
