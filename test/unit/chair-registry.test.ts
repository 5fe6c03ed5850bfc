import { describe, expect, it } from 'vitest';
import { ChairRegistry } from '../../agent/core/chair-registry.js';
import type { ChairReading } from '../../agent/vendor/vendor-api.js';

const chair = (id: string, over: Partial<ChairReading> = {}): ChairReading => ({
  deviceId: id,
  deviceCode: null,
  deviceName: null,
  location: null,
  status: 'Available',
  seated: false,
  leftMin: null,
  leftSec: null,
  serverTime: null,
  firmwareVersion: null,
  ...over,
});

function registry(expected: string[] = []): { reg: ChairRegistry; states: string[]; avail: string[] } {
  const reg = new ChairRegistry({ timeZone: 'Asia/Bangkok', availableStatuses: ['Available'], staleAfterMs: 3000, expected });
  const states: string[] = [];
  const avail: string[] = [];
  reg.on('state', (s) => states.push(`${s.deviceId}:${s.status}`));
  reg.on('availability', (id, online) => avail.push(`${id}:${online ? 'online' : 'offline'}`));
  return { reg, states, avail };
}

describe('chair registry', () => {
  it('announces a chair once, then only when it changes', () => {
    const { reg, states, avail } = registry();
    reg.applyList([chair('A'), chair('B')], 0);
    reg.applyList([chair('A'), chair('B')], 1000);
    reg.applyList([chair('A', { status: 'Running', leftMin: 1, leftSec: 0 }), chair('B')], 2000);
    expect(states).toEqual(['A:Available', 'B:Available', 'A:Running']);
    expect(avail).toEqual(['A:online', 'B:online']);
  });

  it('keeps the chair\'s names when a status read does not carry them', () => {
    const { reg } = registry();
    reg.applyList([chair('A', { deviceCode: 'C-1', deviceName: 'Chair one', location: 'Mall 3F' })], 0);
    const after = reg.applyReading(chair('A', { status: 'Running', leftMin: 5, leftSec: 0 }));
    expect(after).toMatchObject({ status: 'Running', deviceCode: 'C-1', deviceName: 'Chair one', location: 'Mall 3F' });
    expect(reg.view('A')?.state).toMatchObject({ deviceName: 'Chair one' });
  });

  it('gives the latest ServerTime on read without announcing a change', () => {
    const { reg, states } = registry();
    reg.applyList([chair('A', { serverTime: '2026-11-22 10:00:00' })], 0);
    reg.applyList([chair('A', { serverTime: '2026-11-22 10:00:01' })], 1000);
    expect(states).toEqual(['A:Available']);
    expect(reg.view('A')?.state?.serverTime).toBe('2026-11-22T10:00:01+07:00');
  });

  it('turns every chair offline when no poll succeeds for three periods, and back when one does', () => {
    const { reg, avail } = registry();
    reg.applyList([chair('A')], 0);
    reg.refreshAvailability(2999);
    expect(avail).toEqual(['A:online']);
    reg.refreshAvailability(3000);
    expect(avail).toEqual(['A:online', 'A:offline']);
    expect(reg.view('A')?.online).toBe(false);
    reg.applyList([chair('A')], 5000);
    expect(avail).toEqual(['A:online', 'A:offline', 'A:online']);
  });

  it('turns a chair that vanished from the list offline and keeps its last state', () => {
    const { reg, avail } = registry();
    reg.applyList([chair('A'), chair('B')], 0);
    reg.applyList([chair('A')], 1000);
    expect(avail).toContain('B:offline');
    expect(reg.view('B')?.state?.status).toBe('Available');
  });

  it('knows the chairs the site expects before the vendor lists them, as offline', () => {
    const { reg } = registry(['MC1']);
    expect(reg.view('MC1')).toEqual({ deviceId: 'MC1', state: null, online: false });
    expect(reg.view('nope')).toBeNull();
  });
});
