import { describe, expect, it } from 'vitest';
import { IntMap } from '../../agent/platform/int-map.js';

/** A small deterministic PRNG (mulberry32), so a failure replays. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

function entriesOf<V>(m: IntMap<V>): [number, V][] {
  const out: [number, V][] = [];
  m.forEach((v, k) => out.push([k, v]));
  return out.sort((a, b) => a[0] - b[0]);
}

function sameAs<V>(m: IntMap<V>, oracle: Map<number, V>): void {
  expect(m.size).toBe(oracle.size);
  expect(entriesOf(m)).toEqual([...oracle].sort((a, b) => a[0] - b[0]));
}

describe('IntMap (records and packets in flight)', () => {
  it('keeps, replaces and removes entries as a Map does', () => {
    const m = new IntMap<string>();
    expect(m.get(7)).toBeUndefined();
    expect(m.has(7)).toBe(false);
    m.set(7, 'a').set(8, 'b');
    m.set(7, 'c');
    expect([m.size, m.get(7), m.get(8), m.has(8)]).toEqual([2, 'c', 'b', true]);
    expect(m.delete(7)).toBe(true);
    expect(m.delete(7)).toBe(false);
    expect([m.size, m.get(7), m.has(7), m.get(8)]).toEqual([1, undefined, false, 'b']);
  });

  it('stays a map through a sliding window of a flush, wrap-around packet ids, growth and random churn', () => {
    for (const [seed, keyOf] of [
      // a window of seqs, acknowledged mostly in order
      [1, (r: () => number, n: number) => n - Math.floor(r() * 120)],
      // few keys, many collisions, deleted and set again
      [2, (r: () => number) => Math.floor(r() * 40)],
      // seqs past 2^32 and strided keys (only the low bits are hashed)
      [3, (r: () => number) => 2 ** 33 + 64 * Math.floor(r() * 500)],
      // mqtt.js packet ids, 1..65535
      [4, (r: () => number, n: number) => ((n + Math.floor(r() * 100)) % 65_535) + 1],
    ] as const) {
      const r = random(seed);
      const m = new IntMap<number>(8);
      const oracle = new Map<number, number>();
      for (let n = 0; n < 20_000; n++) {
        const key = keyOf(r, n);
        if (r() < 0.5) {
          m.set(key, n);
          oracle.set(key, n);
        } else expect(m.delete(key)).toBe(oracle.delete(key));
        const probe = keyOf(r, n);
        expect(m.get(probe)).toBe(oracle.get(probe));
        if (n % 1_000 === 0) sameAs(m, oracle);
      }
      sameAs(m, oracle);
      for (const key of [...oracle.keys()]) m.delete(key);
      expect([m.size, entriesOf(m)]).toEqual([0, []]);
    }
  });
});
