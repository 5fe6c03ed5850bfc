import { vendorTimeToIso } from '../time/vendor-time.js';
import { addDecimal, formatDecimal, parseDecimal, ZERO, type Decimal } from './decimal.js';

/** A stored transaction record, as the outbox hands it over. */
export interface TallyRecord {
  transactionId: string;
  status: string;
  deviceId: string;
  /** The vendor's record as JSON text. */
  record: string;
}

/** One chair's day, or the site's. Takings are exact decimal strings by PaymentMethod. */
export interface DayTotals {
  uses: number;
  minutes: number;
  takings: Record<string, string>;
  /** All methods together. */
  total: string;
}

export interface DaySummary {
  /** The site's day, "YYYY-MM-DD" in site.timezone. */
  date: string;
  timeZone: string;
  /**
   * When the day began: its midnight in site.timezone, ISO 8601 with the offset (null before the
   * first day is known). Home Assistant reads it as the takings' last reset.
   */
  startedAt: string | null;
  site: DayTotals & {
    /** Uses whose Amount was not a decimal: counted as uses, not in takings. */
    unreadAmounts: number;
  };
  /** Chairs with a use today, by DeviceId. */
  chairs: Record<string, DayTotals>;
}

interface Use {
  deviceId: string;
  method: string;
  amount: Decimal | null;
  minutes: number;
  /** 0 for "playing" (the webhook's first word on a use), 1 for a later word (finished, or one not documented). */
  rank: number;
}

const PLAY_TIME = /^\s*\d{1,6}(?:\.\d{1,3})?\s*$/;
/** A payment method name is cut to this many characters... */
const METHOD_CHARS = 32;
/** ...and past this many different ones in a day, the rest count as "other": a record's text cannot grow B/summary or /metrics. */
const MAX_METHODS = 16;

function text(v: unknown): string | null {
  return typeof v === 'string' ? v : typeof v === 'number' && Number.isFinite(v) ? String(v) : null;
}

/**
 * Today's uses, minutes and takings, from the transaction records the agent holds. A use is one
 * TransactionId: its "playing" record (webhook) and its "finished" one (list) count once, the
 * later word winning, and an earlier word arriving after a later one changes nothing. PlayTime is
 * read as minutes (what the control call's Time is in; the vendor does not state the unit); one
 * that is not a number counts as 0. A PaymentMethod that is missing counts as "unknown"; names
 * are cut to 32 characters, and past 16 different ones in a day the rest count as "other".
 */
export class DayTally {
  private readonly uses = new Map<string, Use>();
  private readonly methods = new Set<string>();

  constructor(
    readonly date: string,
    private readonly timeZone: string,
  ) {}

  get size(): number {
    return this.uses.size;
  }

  /** Counts a record of this day; true if the summary changed. */
  add(r: TallyRecord, fields: Record<string, unknown>): boolean {
    const rank = r.status.trim().toLowerCase() === 'playing' ? 0 : 1;
    const prev = this.uses.get(r.transactionId);
    if (prev && prev.rank > rank) return false;
    const playTime = text(fields['PlayTime']);
    const amountText = text(fields['Amount']);
    const method = this.methodOf(text(fields['PaymentMethod']));
    const use: Use = {
      deviceId: r.deviceId,
      method,
      amount: amountText === null ? null : parseDecimal(amountText),
      minutes: playTime !== null && PLAY_TIME.test(playTime) ? Number(playTime) : 0,
      rank,
    };
    if (prev && sameUse(prev, use)) return false;
    this.uses.set(r.transactionId, use);
    return true;
  }

  private methodOf(given: string | null): string {
    const name = given?.trim().toLowerCase().slice(0, METHOD_CHARS) || 'unknown';
    if (this.methods.has(name)) return name;
    if (this.methods.size >= MAX_METHODS) return 'other';
    this.methods.add(name);
    return name;
  }

  summary(): DaySummary {
    const site = blank();
    let unreadAmounts = 0;
    const chairs = new Map<string, Sums>();
    for (const use of this.uses.values()) {
      let chair = chairs.get(use.deviceId);
      if (!chair) chairs.set(use.deviceId, (chair = blank()));
      for (const sums of [site, chair]) {
        sums.uses++;
        sums.minutes += use.minutes;
        if (use.amount) {
          sums.takings.set(use.method, addDecimal(sums.takings.get(use.method) ?? ZERO, use.amount));
          sums.total = addDecimal(sums.total, use.amount);
        } else if (!sums.takings.has(use.method)) {
          sums.takings.set(use.method, ZERO);
        }
      }
      if (!use.amount) unreadAmounts++;
    }
    return {
      date: this.date,
      timeZone: this.timeZone,
      startedAt: vendorTimeToIso(`${this.date} 00:00:00`, this.timeZone),
      site: { ...totals(site), unreadAmounts },
      chairs: Object.fromEntries([...chairs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([id, sums]) => [id, totals(sums)])),
    };
  }
}

interface Sums {
  uses: number;
  minutes: number;
  takings: Map<string, Decimal>;
  total: Decimal;
}

function blank(): Sums {
  return { uses: 0, minutes: 0, takings: new Map(), total: ZERO };
}

function totals(s: Sums): DayTotals {
  const takings = Object.fromEntries([...s.takings].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([m, d]) => [m, formatDecimal(d)]));
  // Minutes are whole in practice; a fractional PlayTime is kept to the thousandth, not to float noise.
  return { uses: s.uses, minutes: Math.round(s.minutes * 1000) / 1000, takings, total: formatDecimal(s.total) };
}

function sameUse(a: Use, b: Use): boolean {
  const amounts = a.amount === null || b.amount === null ? a.amount === b.amount : a.amount.units === b.amount.units && a.amount.scale === b.amount.scale;
  return a.deviceId === b.deviceId && a.method === b.method && amounts && a.minutes === b.minutes && a.rank === b.rank;
}
