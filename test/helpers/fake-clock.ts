import { sleepWith, type Clock, type Timer } from '../../agent/platform/clock.js';

interface Pending {
  id: number;
  at: number;
  fn: () => void;
  every?: number;
}

/**
 * A clock that only moves when told to; timers fire in time order as it advances. Time passes on
 * the monotonic clock; the wall clock follows it, plus whatever jumps a test makes (`jump`), as
 * NTP makes on a Pi that booted with a stale time.
 */
export class FakeClock implements Clock {
  private t: number;
  private wallOffset = 0;
  private seq = 0;
  private pending: Pending[] = [];

  constructor(private readonly start = Date.UTC(2026, 10, 22, 5, 0, 0)) {
    this.t = start;
  }

  now(): number {
    return this.t + this.wallOffset;
  }

  monotonic(): number {
    return this.t - this.start;
  }

  /** The wall clock jumps by `ms` (negative: backwards); timers and the monotonic clock do not. */
  jump(ms: number): void {
    this.wallOffset += ms;
  }

  setTimeout(fn: () => void, ms: number): Timer {
    return this.add({ id: ++this.seq, at: this.t + Math.max(0, ms), fn });
  }

  setInterval(fn: () => void, ms: number): Timer {
    return this.add({ id: ++this.seq, at: this.t + Math.max(1, ms), fn, every: Math.max(1, ms) });
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepWith(this, ms, signal);
  }

  get timerCount(): number {
    return this.pending.length;
  }

  /** Moves time forward, firing due timers in order and letting promises settle after each. */
  async advance(ms: number): Promise<void> {
    const target = this.t + ms;
    await settle();
    for (;;) {
      this.pending.sort((a, b) => a.at - b.at || a.id - b.id);
      const next = this.pending[0];
      if (!next || next.at > target) break;
      this.t = next.at;
      if (next.every) next.at += next.every;
      else this.pending.shift();
      next.fn();
      await settle();
    }
    this.t = target;
    await settle();
  }

  private add(p: Pending): Timer {
    this.pending.push(p);
    return { cancel: () => (this.pending = this.pending.filter((x) => x !== p)) };
  }
}

/** Lets queued promise callbacks and I/O callbacks run. */
export async function settle(rounds = 3): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((r) => setImmediate(r));
}
