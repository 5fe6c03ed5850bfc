/**
 * A reader for the system's time zone database: TZif files (RFC 8536), versions 1 to 4, with the
 * POSIX TZ rule of their footer for instants after the last listed transition (slim files list
 * few). Pure: it gets the file's bytes and answers offsets.
 */

/** The offset from UTC, in seconds east, at an instant in ms. */
export type OffsetAt = (epochMs: number) => number;

const HEADER = 44;
const HOUR = 3600;

/** null when the bytes are not a TZif file this reader understands (leap-second "right/" zones included). */
export function parseTzif(bytes: Uint8Array): OffsetAt | null {
  if (bytes.length < HEADER || String.fromCharCode(...bytes.subarray(0, 4)) !== 'TZif') return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = bytes[4] ?? 0;
  const counts = (at: number): number[] => [0, 1, 2, 3, 4, 5].map((i) => view.getUint32(at + 20 + i * 4));
  let [isut, isstd, leap, timecnt, typecnt, charcnt] = counts(0) as [number, number, number, number, number, number];
  let at = HEADER;
  let wide = false;
  if (version >= 0x32) {
    // Skip the 32-bit block; the 64-bit one follows with its own header.
    at += timecnt * 5 + typecnt * 6 + charcnt + leap * 8 + isstd + isut;
    if (bytes.length < at + HEADER) return null;
    [isut, isstd, leap, timecnt, typecnt, charcnt] = counts(at) as [number, number, number, number, number, number];
    at += HEADER;
    wide = true;
  }
  if (leap > 0 || typecnt === 0) return null;
  const timeSize = wide ? 8 : 4;
  const end = at + timecnt * (timeSize + 1) + typecnt * 6 + charcnt + leap * (timeSize + 4) + isstd + isut;
  if (bytes.length < end) return null;
  const times = new Float64Array(timecnt);
  for (let i = 0; i < timecnt; i++) times[i] = wide ? Number(view.getBigInt64(at + i * 8)) : view.getInt32(at + i * 4);
  const idx = bytes.subarray(at + timecnt * timeSize, at + timecnt * (timeSize + 1));
  const typesAt = at + timecnt * (timeSize + 1);
  const offsets = Array.from({ length: typecnt }, (_, i) => view.getInt32(typesAt + i * 6));
  if ([...idx].some((i) => i >= typecnt)) return null;
  let rule: OffsetAt | null = null;
  if (wide) {
    const footer = new TextDecoder().decode(bytes.subarray(end)).split('\n')[1] ?? '';
    if (footer !== '') {
      rule = parsePosixTz(footer);
      if (!rule) return null;
    }
  }
  const last = timecnt > 0 ? (offsets[idx[timecnt - 1] as number] as number) : (offsets[0] as number);
  return (epochMs) => {
    const t = Math.floor(epochMs / 1000);
    if (timecnt === 0 || t >= (times[timecnt - 1] as number)) return rule ? rule(epochMs) : last;
    if (t < (times[0] as number)) return offsets[0] as number;
    let lo = 0;
    let hi = timecnt - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((times[mid] as number) <= t) lo = mid;
      else hi = mid - 1;
    }
    return offsets[idx[lo] as number] as number;
  };
}

const NAME = /^(?:[A-Za-z]{3,}|<[A-Za-z0-9+-]{3,}>)/;
const OFFSET = /^([+-]?)(\d{1,3})(?::(\d{1,2}))?(?::(\d{1,2}))?/;

function takeTime(s: string): [number, string] | null {
  const m = OFFSET.exec(s);
  if (!m) return null;
  const seconds = Number(m[2]) * HOUR + Number(m[3] ?? 0) * 60 + Number(m[4] ?? 0);
  return [m[1] === '-' ? -seconds : seconds, s.slice(m[0].length)];
}

/** Day of the year (0-based) a rule date names in a year, or null when it is not a rule date. */
type RuleDate = (year: number) => number;

const isLeap = (y: number): boolean => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
const dayOfYear = (y: number, month: number, day: number): number => (Date.UTC(y, month - 1, day) - Date.UTC(y, 0, 1)) / 86_400_000;

function parseRuleDate(s: string): RuleDate | null {
  let m = /^M(\d{1,2})\.(\d)\.(\d)$/.exec(s);
  if (m) {
    const [month, week, weekday] = [Number(m[1]), Number(m[2]), Number(m[3])];
    if (month < 1 || month > 12 || week < 1 || week > 5 || weekday > 6) return null;
    return (y) => {
      const first = new Date(Date.UTC(y, month - 1, 1)).getUTCDay();
      let day = 1 + ((weekday - first + 7) % 7) + (week - 1) * 7;
      const length = new Date(Date.UTC(y, month, 0)).getUTCDate();
      while (day > length) day -= 7;
      return dayOfYear(y, month, day);
    };
  }
  m = /^J(\d{1,3})$/.exec(s);
  if (m) {
    const n = Number(m[1]);
    if (n < 1 || n > 365) return null;
    return (y) => n - 1 + (isLeap(y) && n >= 60 ? 1 : 0);
  }
  m = /^(\d{1,3})$/.exec(s);
  if (m) {
    const n = Number(m[1]);
    return n <= 365 ? () => n : null;
  }
  return null;
}

function parseRulePart(s: string): { date: RuleDate; time: number } | null {
  const [dateText, timeText] = s.split('/');
  const date = parseRuleDate(dateText ?? '');
  if (!date) return null;
  if (timeText === undefined) return { date, time: 2 * HOUR };
  const time = takeTime(timeText);
  return time && time[1] === '' ? { date, time: time[0] } : null;
}

/** A POSIX TZ string such as "CET-1CEST,M3.5.0,M10.5.0/3" (POSIX offsets are west-positive). */
export function parsePosixTz(tz: string): OffsetAt | null {
  const [spec = '', startText, endText, ...extra] = tz.split(',');
  let rest = spec;
  const std = NAME.exec(rest);
  if (!std) return null;
  const stdOff = takeTime(rest.slice(std[0].length));
  if (!stdOff) return null;
  const stdSeconds = -stdOff[0] || 0;
  rest = stdOff[1];
  if (rest === '') return extra.length === 0 && startText === undefined ? () => stdSeconds : null;
  const dst = NAME.exec(rest);
  if (!dst) return null;
  rest = rest.slice(dst[0].length);
  let dstSeconds = stdSeconds + HOUR;
  if (rest !== '') {
    const dstOff = takeTime(rest);
    if (!dstOff || dstOff[1] !== '') return null;
    dstSeconds = -dstOff[0] || 0;
  }
  if (startText === undefined || endText === undefined || extra.length > 0) return null;
  const start = parseRulePart(startText);
  const end = parseRulePart(endText);
  if (!start || !end) return null;
  const cache = new Map<number, [number, number]>();
  const bounds = (year: number): [number, number] => {
    let b = cache.get(year);
    if (!b) {
      const jan1 = Date.UTC(year, 0, 1) / 1000;
      // A change's time is in the local time in force before it.
      b = [jan1 + start.date(year) * 86_400 + start.time - stdSeconds, jan1 + end.date(year) * 86_400 + end.time - dstSeconds];
      if (cache.size > 16) cache.clear();
      cache.set(year, b);
    }
    return b;
  };
  return (epochMs) => {
    const t = Math.floor(epochMs / 1000);
    const year = new Date((t + stdSeconds) * 1000).getUTCFullYear();
    const [s, e] = bounds(year);
    const inDst = s < e ? t >= s && t < e : !(t >= e && t < s);
    return inDst ? dstSeconds : stdSeconds;
  };
}
