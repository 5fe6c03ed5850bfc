/** Marks a free slot (no integer key is NaN). */
const FREE = Number.NaN;
const GOLDEN = 0x9e3779b1;

/**
 * A map from integer keys to values, for entries that come and go at a high rate and are each
 * held briefly: the records and the packets in flight while a backlog flushes.
 *
 * Why not a Map: V8 never reuses a deleted Map entry's place, so a Map whose entries come and go
 * is given a new hash table every few dozen changes. Once its table is in the old generation (a
 * Map that sat idle for a few seconds, as the in-flight window does between flushes), V8
 * allocates each new table there too, and each replaced table keeps its entries as they were
 * (with a link to its successor, for iterators) until the next full collection. Everything put in
 * the Map is then held from the old generation and survives every young-generation collection
 * until that full one. In a 100,000-record flush that promoted most of the records and their
 * payloads (docs/ARCHITECTURE.md, "CPU of a flush after an outage").
 *
 * Open addressing with linear probing over a power-of-two table: a deletion moves the later
 * entries of its run back instead of leaving a marker, so a table whose entries only come and go
 * is never rebuilt. It doubles when half full and never shrinks (what is in flight bounds it).
 * Keys are safe integers; the order of forEach is not the order of insertion.
 */
export class IntMap<V> {
  private keys: Float64Array;
  private slots: (V | undefined)[];
  private mask: number;
  private shift: number;
  private count = 0;

  constructor(capacity = 64) {
    let bits = 3;
    while (1 << bits < capacity) bits++;
    this.shift = 32 - bits;
    this.mask = (1 << bits) - 1;
    this.keys = new Float64Array(1 << bits).fill(FREE);
    this.slots = new Array<V | undefined>(1 << bits).fill(undefined);
  }

  get size(): number {
    return this.count;
  }

  has(key: number): boolean {
    return this.find(key) >= 0;
  }

  get(key: number): V | undefined {
    const i = this.find(key);
    return i >= 0 ? this.slots[i] : undefined;
  }

  set(key: number, value: V): this {
    let i = this.home(key);
    for (;;) {
      const k = this.keys[i] as number;
      if (k === key) {
        this.slots[i] = value;
        return this;
      }
      if (k !== k) break; // free
      i = (i + 1) & this.mask;
    }
    this.keys[i] = key;
    this.slots[i] = value;
    this.count++;
    if (this.count * 2 > this.mask + 1) this.grow();
    return this;
  }

  delete(key: number): boolean {
    let i = this.find(key);
    if (i < 0) return false;
    // Entries after it in its run that would be looked for at or before its slot move back into it.
    for (let j = (i + 1) & this.mask; ; j = (j + 1) & this.mask) {
      const k = this.keys[j] as number;
      if (k !== k) break;
      const home = this.home(k);
      if (((j - home) & this.mask) >= ((j - i) & this.mask)) {
        this.keys[i] = k;
        this.slots[i] = this.slots[j];
        i = j;
      }
    }
    this.keys[i] = FREE;
    this.slots[i] = undefined;
    this.count--;
    return true;
  }

  /** Calls fn for each entry. The map must not be changed meanwhile: collect the keys first. */
  forEach(fn: (value: V, key: number) => void): void {
    for (let i = 0; i <= this.mask; i++) {
      const k = this.keys[i] as number;
      if (k === k) fn(this.slots[i] as V, k);
    }
  }

  private find(key: number): number {
    for (let i = this.home(key); ; i = (i + 1) & this.mask) {
      const k = this.keys[i] as number;
      if (k === key) return i;
      if (k !== k) return -1;
    }
  }

  /** Fibonacci hashing of the low 32 bits: consecutive keys spread, strided ones too. */
  private home(key: number): number {
    return Math.imul(key | 0, GOLDEN) >>> this.shift;
  }

  private grow(): void {
    const keys = this.keys;
    const slots = this.slots;
    const size = (this.mask + 1) * 2;
    this.mask = size - 1;
    this.shift--;
    this.keys = new Float64Array(size).fill(FREE);
    this.slots = new Array<V | undefined>(size).fill(undefined);
    this.count = 0;
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i] as number;
      if (k === k) this.set(k, slots[i] as V);
    }
  }
}
