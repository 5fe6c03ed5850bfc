import { parse as parseCron } from 'node-cron';

/**
 * The next match of a node-cron expression, computed on wall-clock times (milliseconds whose UTC
 * fields are the wall clock, as the vendor's naive times are) with node-cron's own parser and its
 * field semantics: day of month AND day of week, `L`, `L-n`, `nW`, `LW`, `nL`, `n#k`.
 * Why not node-cron's matcher: it reads every wall time through Intl, which costs ~8 MB of ICU
 * memory for good (see time-zone.ts).
 */
type Field = readonly (number | string)[];

const DAY = 86_400_000;
/** node-cron's own search horizon. */
const MAX_DAYS = 366 * 100;

const lastDay = (y: number, m: number): number => new Date(Date.UTC(y, m, 0)).getUTCDate();
const weekdayOf = (y: number, m: number, d: number): number => new Date(Date.UTC(y, m - 1, d)).getUTCDay();

function nearestWeekday(y: number, m: number, target: number): number {
  const last = lastDay(y, m);
  if (target < 1 || target > last) return -1;
  const wd = weekdayOf(y, m, target);
  if (wd === 6) return target === 1 ? target + 2 : target - 1;
  if (wd === 0) return target === last ? target - 2 : target + 1;
  return target;
}

function dayOfMonthMatches(field: Field, y: number, m: number, d: number): boolean {
  for (const v of field) {
    if (v === d) return true;
    if (typeof v !== 'string') continue;
    if (v === 'L' && d === lastDay(y, m)) return true;
    const w = /^(\d{1,2}|L)W$/.exec(v);
    if (w && nearestWeekday(y, m, w[1] === 'L' ? lastDay(y, m) : Number(w[1])) === d) return true;
    const back = /^L-(\d{1,2})$/.exec(v);
    if (back && lastDay(y, m) - Number(back[1]) === d) return true;
  }
  return false;
}

function dayOfWeekMatches(field: Field, y: number, m: number, d: number): boolean {
  const wd = weekdayOf(y, m, d);
  for (const v of field) {
    if (v === wd) return true;
    if (typeof v !== 'string') continue;
    const nth = /^([0-7])#([1-5])$/.exec(v);
    if (nth && Number(nth[1]) % 7 === wd && Math.floor((d - 1) / 7) + 1 === Number(nth[2])) return true;
    const last = /^([0-7])L$/i.exec(v);
    if (last && Number(last[1]) % 7 === wd && d + 7 > lastDay(y, m)) return true;
  }
  return false;
}

export interface WallMatcher {
  /** Wall-clock matches strictly after `after`, ascending (whole seconds). */
  after(after: number): Generator<number>;
}

/** Throws node-cron's message for an invalid expression (the config has validated it before). */
export function wallMatcher(expression: string): WallMatcher {
  const f = parseCron(expression);
  const asc = (xs: Field): number[] => xs.filter((x): x is number => typeof x === 'number').sort((a, b) => a - b);
  const [seconds, minutes, hours, months] = [asc(f.second), asc(f.minute), asc(f.hour), new Set(asc(f.month))];
  return {
    *after(after) {
      let day = Math.floor(after / DAY) * DAY;
      for (let i = 0; i < MAX_DAYS; i++, day += DAY) {
        const date = new Date(day);
        const [y, m, d] = [date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate()];
        if (!months.has(m) || !dayOfMonthMatches(f.dayOfMonth, y, m, d) || !dayOfWeekMatches(f.dayOfWeek, y, m, d)) continue;
        for (const h of hours) {
          if (day + (h + 1) * 3_600_000 <= after) continue;
          for (const min of minutes) {
            for (const s of seconds) {
              const t = day + h * 3_600_000 + min * 60_000 + s * 1000;
              if (t > after) yield t;
            }
          }
        }
      }
      throw new Error(`no match of "${expression}" within 100 years`);
    },
  };
}

const THREE_HOURS = 3 * 3_600_000;

/**
 * The first instant after `after` whose wall time in the zone matches. A wall time in a spring-
 * forward gap does not exist and is skipped; one in a fall-back overlap happens twice and matches
 * at both, so a frequent schedule keeps running through the repeated hour.
 * `offsetAt` gives the zone's offset in seconds east at an instant.
 */
export function nextInstant(matcher: WallMatcher, after: number, offsetAt: (epochMs: number) => number): number {
  const off = (t: number): number => offsetAt(t) * 1000;
  // Wall times a little before now's can still lie ahead when the clocks go back within hours.
  const back = Math.max(0, off(after) - off(after + THREE_HOURS));
  for (const wall of matcher.after(after + off(after) - back)) {
    const o1 = off(wall - off(wall));
    const candidates = new Set([o1, off(wall - o1), off(wall - o1 - THREE_HOURS), off(wall - o1 + THREE_HOURS)]);
    let best = Infinity;
    for (const o of candidates) {
      const instant = wall - o;
      if (off(instant) === o && instant > after && instant < best) best = instant;
    }
    if (best !== Infinity) return best;
  }
  throw new Error('unreachable: the wall-clock search throws first');
}
