import { zoneOffsets } from './time-zone.js';

/**
 * The vendor speaks "YYYY-MM-DD HH:MM:SS" wall-clock times with no zone; they are read in the
 * site's IANA zone. Published times are ISO 8601 with that zone's offset, e.g.
 * "2026-11-22T14:03:05+07:00".
 */
const VENDOR_TIME = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})$/;

export function isValidTimeZone(name: string): boolean {
  return zoneOffsets(name) !== null;
}

/** Offset of the zone from UTC at an instant, in seconds east. */
function offsetSeconds(epochMs: number, zone: string): number {
  const offsetAt = zoneOffsets(zone);
  if (!offsetAt) throw new Error(`unknown time zone ${zone}`);
  return offsetAt(epochMs);
}

/** Offset of the zone from UTC at an instant, in minutes east (as ISO 8601 writes it). */
function offsetMinutes(epochMs: number, zone: string): number {
  return Math.round(offsetSeconds(epochMs, zone) / 60);
}

/** The instant of a vendor wall-clock time in the zone, or null when the text is not of that form. */
export function parseVendorTime(text: string, timeZone: string): number | null {
  const m = VENDOR_TIME.exec(text.trim());
  if (!m) return null;
  const [year, month, day, hour, minute, second] = m.slice(1).map(Number) as [
    number, number, number, number, number, number,
  ];
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 59) return null;
  const asUtc = Date.UTC(year, month - 1, day, hour, minute, second);
  // Two passes settle the offset across a DST change.
  let instant = asUtc - offsetSeconds(asUtc, timeZone) * 1000;
  instant = asUtc - offsetSeconds(instant, timeZone) * 1000;
  return instant;
}

const pad = (n: number, width = 2): string => String(n).padStart(width, '0');

/** "YYYY-MM-DD HH:MM:SS" of an instant in the zone: the form the vendor uses. */
export function formatVendorTime(epochMs: number, timeZone: string): string {
  const d = new Date(Math.floor(epochMs / 1000) * 1000 + offsetSeconds(epochMs, timeZone) * 1000);
  return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
}

/** ISO 8601 with the zone's offset, second precision. */
export function formatIsoWithOffset(epochMs: number, timeZone: string): string {
  const off = offsetMinutes(epochMs, timeZone);
  const sign = off < 0 ? '-' : '+';
  const abs = Math.abs(off);
  return `${formatVendorTime(epochMs, timeZone).replace(' ', 'T')}${sign}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
}

/** A vendor time re-expressed as ISO 8601 with the site's offset; null when unreadable. */
export function vendorTimeToIso(text: string, timeZone: string): string | null {
  const instant = parseVendorTime(text, timeZone);
  return instant === null ? null : formatIsoWithOffset(instant, timeZone);
}

/**
 * A vendor wall-clock time as a number without any zone: the milliseconds its fields would be if
 * read as UTC. Windows of the transaction list are computed and written in this form, so they
 * follow the vendor's own clock whatever this box's clock or zone say. Null when unreadable.
 */
export function parseNaive(text: string): number | null {
  const m = VENDOR_TIME.exec(text.trim());
  if (!m) return null;
  const [year, month, day, hour, minute, second] = m.slice(1).map(Number) as [number, number, number, number, number, number];
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 59) return null;
  return Date.UTC(year, month - 1, day, hour, minute, second);
}

/** "YYYY-MM-DD HH:MM:SS" of a naive vendor time. */
export function formatNaive(naive: number): string {
  const d = new Date(Math.floor(naive / 1000) * 1000);
  return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
}

/** The instant a naive vendor time stands for, read in the zone. */
export function naiveToInstant(naive: number, timeZone: string): number {
  let instant = naive - offsetSeconds(naive, timeZone) * 1000;
  instant = naive - offsetSeconds(instant, timeZone) * 1000;
  return instant;
}

/** The naive vendor time of an instant in the zone. */
export function instantToNaive(instant: number, timeZone: string): number {
  return Math.floor(instant / 1000) * 1000 + offsetSeconds(instant, timeZone) * 1000;
}
