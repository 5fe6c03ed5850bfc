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
  const reg = new ChairRegistry({ timeZone: 'Asia/Bangkok', availableStatuses: ['Available'], staleAfterMs: 3000, forgetAfterMs: 3_600_000, expected });
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

  it('forgets a chair only after successful lists have left it out for the grace period, and takes it back', () => {
    const { reg, states, avail } = registry(['MINE']);
    const removed: string[] = [];
    reg.on('removed', (id) => removed.push(id));
    reg.applyList([chair('A'), chair('B')], 0);
    reg.applyList([chair('A')], 1_000);
    expect(avail).toContain('B:offline');
    // The vendor is unreachable for longer than the grace: nothing is forgotten without a list.
    reg.refreshAvailability(5_000_000);
    expect(reg.knownIds()).toContain('B');
    reg.applyList([chair('A')], 3_599_000);
    expect(removed).toEqual([]);
    reg.applyList([chair('A')], 3_600_000);
    expect(removed).toEqual(['B']);
    expect(reg.knownIds()).toEqual(['A', 'MINE']);
    expect(reg.view('B')).toBeNull();
    // A configured chair is never forgotten, however long the vendor leaves it out.
    reg.applyList([chair('A')], 100 * 3_600_000);
    expect(removed).toEqual(['B']);
    // B returns: announced again, state and availability.
    reg.applyList([chair('A'), chair('B')], 101 * 3_600_000);
    expect(states.filter((s) => s.startsWith('B'))).toEqual(['B:Available', 'B:Available']);
    expect(avail.filter((a) => a.startsWith('B'))).toEqual(['B:online', 'B:offline', 'B:online']);
  });
});
