import { describe, expect, it } from 'vitest';
import { ListRepeats, cutServerTimes } from '../../agent/vendor/list-repeat.js';
import { parseChairList, parseJsonText, unwrapEnvelope } from '../../agent/vendor/parse.js';
import type { ChairList } from '../../agent/vendor/vendor-api.js';

function body(time: string | string[], status = 'available', name = 'Chair 1'): string {
  const times = Array.isArray(time) ? time : [time, time];
  return JSON.stringify({
    status: 'success',
    code: 200,
    data: [
      { DeviceId: 'MC1', DeviceName: name, data: { Status: status, Seated: false, LeftMin: 0, LeftSec: 0, ServerTime: times[0] } },
      { DeviceId: 'MC2', DeviceName: 'Chair 2', data: { Status: 'available', Seated: false, LeftMin: 0, LeftSec: 0, ServerTime: times[1] } },
      { DeviceId: 'MC3', data: { Status: 'available' } },
      'not a chair',
    ],
  });
}

function reader(): { read: (text: string) => ChairList; parses: () => number } {
  const repeats = new ListRepeats();
  let parses = 0;
  return {
    read: (text) =>
      repeats.read(text, (t) => {
        parses++;
        return parseChairList(unwrapEnvelope(parseJsonText(t)));
      }),
    parses: () => parses,
  };
}

describe('a chair list that only the vendor clock changed', () => {
  it('is answered from the last parse, with the new ServerTime, and equal to what a parse gives', () => {
    const r = reader();
    r.read(body('2026-11-22 14:00:00'));
    const again = r.read(body('2026-11-22 14:00:01'));
    expect(r.parses()).toBe(1);
    expect(again).toEqual(parseChairList(unwrapEnvelope(parseJsonText(body('2026-11-22 14:00:01')))));
    expect(again.chairs.map((c) => c.serverTime)).toEqual(['2026-11-22 14:00:01', '2026-11-22 14:00:01', null]);
    expect(again.rejected).toHaveLength(1);
  });

  it('is parsed again as soon as anything else changed, a name included', () => {
    const r = reader();
    r.read(body('2026-11-22 14:00:00'));
    expect(r.read(body('2026-11-22 14:00:01', 'running')).chairs[0]?.status).toBe('running');
    expect(r.read(body('2026-11-22 14:00:02', 'running', 'Chair One')).chairs[0]?.deviceName).toBe('Chair One');
    expect(r.parses()).toBe(3);
  });

  it('is parsed every time when the chairs carry different ServerTimes, or ones it would have to unescape', () => {
    const r = reader();
    r.read(body(['2026-11-22 14:00:00', '2026-11-22 14:00:01']));
    r.read(body(['2026-11-22 14:00:01', '2026-11-22 14:00:02']));
    r.read(body('x"y'));
    r.read(body('x"z'));
    expect(r.parses()).toBe(4);
    expect(cutServerTimes(body('x"y'))).toBeNull();
  });
});
