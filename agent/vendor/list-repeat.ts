import type { ChairList } from './vendor-api.js';

const KEY = '"ServerTime":"';
/** Longer values are left to the parser (which bounds display fields). */
const MAX_TIME_TEXT = 64;

export interface CutList {
  /** The body with every ServerTime value taken out. */
  skeleton: string;
  /** The one ServerTime every chair carries; null when the body has none. */
  serverTime: string | null;
}

/**
 * The chair list's body without its ServerTime values, when all of them are the same plain text;
 * null otherwise (then the body is parsed as usual). A body whose skeleton is the same as the
 * previous one's holds the same chairs in the same states: only the vendor's clock moved.
 * `"ServerTime":"` cannot occur inside a JSON string (its quotes would be escaped).
 */
export function cutServerTimes(text: string): CutList | null {
  const parts: string[] = [];
  let serverTime: string | null = null;
  let pos = 0;
  for (;;) {
    const at = text.indexOf(KEY, pos);
    if (at < 0) break;
    const start = at + KEY.length;
    const end = text.indexOf('"', start);
    if (end < 0) return null;
    const value = text.slice(start, end);
    if (value.includes('\\') || value.length > MAX_TIME_TEXT) return null;
    if (serverTime === null) serverTime = value;
    else if (value !== serverTime) return null;
    parts.push(text.slice(pos, start));
    pos = end;
  }
  parts.push(text.slice(pos));
  return { skeleton: parts.join(''), serverTime };
}

/**
 * Work in proportion to what changed: an idle site's list differs from the last only in its
 * ServerTime, and is then answered from the last parse instead of parsing the body again (at
 * 1,000 chairs, JSON.parse alone is a third of the agent's CPU).
 */
export class ListRepeats {
  private last: { skeleton: string; list: ChairList } | null = null;

  read(text: string, parse: (text: string) => ChairList): ChairList {
    const cut = cutServerTimes(text);
    const last = this.last;
    if (cut && last && last.skeleton === cut.skeleton) {
      const time = cut.serverTime;
      const chairs = time === null ? last.list.chairs : last.list.chairs.map((c) => (c.serverTime === null || c.serverTime === time ? c : { ...c, serverTime: time }));
      const list = { chairs, rejected: last.list.rejected };
      this.last = { skeleton: last.skeleton, list };
      return list;
    }
    const list = parse(text);
    this.last = cut ? { skeleton: cut.skeleton, list } : null;
    return list;
  }
}
