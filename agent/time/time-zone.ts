import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseTzif, type OffsetAt } from './tzif.js';

/**
 * Offsets of the site's IANA zone, read from the system's tz database (`/usr/share/zoneinfo`,
 * the tzdata package every Raspberry Pi OS and Debian has), with ICU (Intl) as the fallback for a
 * name the database has no file for (a legacy alias on a box without tzdata-legacy, a spelling
 * only ICU accepts).
 * Why not Intl alone: the first Intl.DateTimeFormat keeps about 8 MB of ICU data and objects in
 * the process for good, some 8% of the agent's idle memory, for what a 2 KB file answers.
 */
const ZONEINFO = '/usr/share/zoneinfo';
const ZONE_NAME = /^[A-Za-z0-9_+-]+(?:\/[A-Za-z0-9_+-]+)*$/;
const MAX_TZIF_BYTES = 256 * 1024;
const QUARTER_HOUR = 900_000;

const zones = new Map<string, OffsetAt | null>();

function fromDatabase(name: string, dir: string): OffsetAt | null {
  if (!ZONE_NAME.test(name)) return null;
  try {
    const bytes = readFileSync(join(dir, name));
    return bytes.length <= MAX_TZIF_BYTES ? parseTzif(bytes) : null;
  } catch {
    return null;
  }
}

function fromIcu(name: string): OffsetAt | null {
  let format: Intl.DateTimeFormat;
  try {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: name,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
  } catch {
    return null;
  }
  // Offsets change on quarter-hour boundaries only: one ICU call per quarter hour.
  const cache = new Map<number, number>();
  return (epochMs) => {
    const quarter = Math.floor(epochMs / QUARTER_HOUR);
    let offset = cache.get(quarter);
    if (offset === undefined) {
      const parts = format.formatToParts(new Date(quarter * QUARTER_HOUR));
      const get = (type: Intl.DateTimeFormatPartTypes): number => Number(parts.find((p) => p.type === type)?.value ?? 0);
      const wall = Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'), get('second'));
      offset = Math.round((wall - quarter * QUARTER_HOUR) / 1000);
      if (cache.size >= 256) cache.clear();
      cache.set(quarter, offset);
    }
    return offset;
  };
}

/** The zone's offset function, or null when neither the database nor ICU knows the name. */
export function zoneOffsets(name: string, dir = ZONEINFO): OffsetAt | null {
  const key = `${dir}\0${name}`;
  if (!zones.has(key)) zones.set(key, fromDatabase(name, dir) ?? fromIcu(name));
  return zones.get(key) ?? null;
}
