import { describe, expect, it } from 'vitest';
import { FAST_RECONNECT_WINDOW_MS, flapDelay, reconnectDelay } from '../../agent/core/backoff.js';

describe('broker reconnect backoff', () => {
  it('retries a returning broker within 100 ms for the first 30 s, jittered between half and all of the wait', () => {
    const waits = [0, 1, 2, 5, 50].map((attempt) => [reconnectDelay(attempt, 1_000, 5_000, () => 0), reconnectDelay(attempt, 1_000, 5_000, () => 1)]);
    expect(waits).toEqual([
      [25, 50],
      [50, 100],
      [50, 100],
      [50, 100],
      [50, 100],
    ]);
  });

  it('backs off to mqtt.reconnectSeconds once the outage is older than 30 s', () => {
    const late = FAST_RECONNECT_WINDOW_MS + 1;
    expect(reconnectDelay(0, late, 5_000, () => 1)).toBe(500);
    expect(reconnectDelay(3, late, 5_000, () => 1)).toBe(4_000);
    expect(reconnectDelay(10, late, 5_000, () => 1)).toBe(5_000);
    expect(reconnectDelay(10, late, 5_000, () => 0)).toBe(2_500);
  });

  it('after connections the broker takes away at once, waits 5 s, doubling to 5 min, jittered', () => {
    expect([1, 2, 3, 7, 8, 30].map((flaps) => flapDelay(flaps, () => 1))).toEqual([5_000, 10_000, 20_000, 300_000, 300_000, 300_000]);
    expect(flapDelay(1, () => 0)).toBe(2_500);
  });
});
