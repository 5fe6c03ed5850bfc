import type { Clock } from '../platform/clock.js';

/** What to do with a request that came in over MQTT. */
export type Admit =
  /** Carry it out and answer it. */
  | 'serve'
  /** Answer at once that it was not carried out (`rate_limited`), without doing its work. */
  | 'refuse'
  /** Neither: too many requests, or too many answers the broker has not taken yet. Count it. */
  | 'drop';

export interface RequestBudgetOptions {
  clock: Clock;
  /** Requests carried out per lane: a second's worth, and at most this many at once. */
  perLane?: Rate;
  /** For all lanes together. */
  total?: Rate;
  /** Refusals answered, per lane and for all lanes (each answer costs a publish too). */
  refusalsPerLane?: Rate;
  refusalsTotal?: Rate;
  /** Answers published and not yet acknowledged by the broker, for all lanes together. */
  maxAnswersWaiting?: number;
  /** Lanes kept apart; past this many, the rest share one. */
  maxLanes?: number;
}

export interface Rate {
  perSecond: number;
  burst: number;
}

/** A token bucket: `burst` at once, refilled at `perSecond`. */
class Bucket {
  private tokens: number;
  private at: number;

  constructor(
    private readonly rate: Rate,
    now: number,
  ) {
    this.tokens = rate.burst;
    this.at = now;
  }

  has(now: number): boolean {
    this.tokens = Math.min(this.rate.burst, this.tokens + ((now - this.at) / 1000) * this.rate.perSecond);
    this.at = now;
    return this.tokens >= 1;
  }

  take(): void {
    this.tokens -= 1;
  }
}

interface Lane {
  serve: Bucket;
  refuse: Bucket;
}

/** The fix the log gives for requests over the budget. */
export const FLOOD_FIX =
  'a site system sends these in a loop (an automation that triggers itself, a script without a pause): mosquitto_sub -v -t on the topic shows them coming';

const OVERFLOW_LANE = '\u0000overflow';

/**
 * How much work the requests other site systems send over MQTT (start commands, bridge
 * requests) may make, in aggregate. A client that repeats a request in a loop (an automation
 * that triggers itself, a script without a sleep) could otherwise make the agent answer faster
 * than the broker takes the answers: mqtt.js holds every unsent answer in memory, and 160,000
 * `info` requests a second took the agent past 1.6 GB in 5 s, 8 s for /healthz, where the unit's
 * MemoryMax is 300 MB.
 *
 * Each lane (a bridge request name, a chair's start commands) carries out a few requests a
 * second with a burst, so one flood does not stop the others; all lanes share a larger total.
 * Past that, a request is answered `rate_limited` without its work, at a rate of its own; past
 * that too, or while `maxAnswersWaiting` answers wait for the broker, it is dropped unanswered
 * and counted. A dropped request costs the agent its parse only.
 */
export class RequestBudget {
  private readonly lanes = new Map<string, Lane>();
  private readonly total: Bucket;
  private readonly refusals: Bucket;
  private waiting = 0;

  constructor(private readonly opts: RequestBudgetOptions) {
    const now = opts.clock.monotonic();
    this.total = new Bucket(opts.total ?? { perSecond: 100, burst: 200 }, now);
    this.refusals = new Bucket(opts.refusalsTotal ?? { perSecond: 50, burst: 50 }, now);
  }

  /** Answers published and not yet acknowledged (or failed). */
  get answersWaiting(): number {
    return this.waiting;
  }

  admit(lane: string): Admit {
    if (this.waiting >= (this.opts.maxAnswersWaiting ?? 256)) return 'drop';
    const now = this.opts.clock.monotonic();
    const l = this.lane(lane, now);
    if (l.serve.has(now) && this.total.has(now)) {
      l.serve.take();
      this.total.take();
      return 'serve';
    }
    if (l.refuse.has(now) && this.refusals.has(now)) {
      l.refuse.take();
      this.refusals.take();
      return 'refuse';
    }
    return 'drop';
  }

  /** Counts an answer as waiting until `sent` settles. */
  answering<T>(sent: Promise<T>): Promise<T> {
    this.waiting += 1;
    return sent.finally(() => {
      this.waiting -= 1;
    });
  }

  private lane(name: string, now: number): Lane {
    const key = this.lanes.has(name) || this.lanes.size < (this.opts.maxLanes ?? 1024) ? name : OVERFLOW_LANE;
    let l = this.lanes.get(key);
    if (!l) {
      l = { serve: new Bucket(this.opts.perLane ?? { perSecond: 10, burst: 20 }, now), refuse: new Bucket(this.opts.refusalsPerLane ?? { perSecond: 10, burst: 10 }, now) };
      this.lanes.set(key, l);
    }
    return l;
  }
}
