import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { zoneOffsets } from '../../agent/time/time-zone.js';
import { parsePosixTz, parseTzif } from '../../agent/time/tzif.js';

const ZONEINFO = '/usr/share/zoneinfo';
const ZIC = '/usr/sbin/zic';
const hasTzdata = existsSync(join(ZONEINFO, 'tzdata.zi'));
const DAY = 86_400_000;
const at = (iso: string): number => Date.parse(iso);

const formats = new Map<string, Intl.DateTimeFormat>();
function icuOffset(zone: string, epochMs: number): number {
  if (!formats.has(zone)) {
    formats.set(zone, new Intl.DateTimeFormat('en-US', {
      timeZone: zone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
    }));
  }
  const parts = (formats.get(zone) as Intl.DateTimeFormat).formatToParts(new Date(epochMs));
  const get = (t: string): number => Number(parts.find((p) => p.type === t)?.value);
  return (Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'), get('second')) - epochMs) / 1000;
}

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe.skipIf(!hasTzdata)('time zones from the system tz database', () => {
  it('gives the offsets ICU gives, daylight saving, half hours and the far future included', () => {
    // Zones whose rules have been stable for years, so the box's tzdata and Node's ICU agree.
    const zones = ['Asia/Bangkok', 'Europe/Berlin', 'Europe/London', 'Europe/Dublin', 'America/New_York', 'America/St_Johns',
      'America/Sao_Paulo', 'Australia/Sydney', 'Australia/Lord_Howe', 'Pacific/Chatham', 'Asia/Kolkata', 'Asia/Tokyo', 'UTC'];
    for (const zone of zones) {
      const offsetAt = zoneOffsets(zone);
      expect(offsetAt, zone).not.toBeNull();
      // Every 5 days and 7 hours from 2000 to 2070: across every change, and past 2037 where the
      // file's list ends and its POSIX rule takes over.
      for (let t = at('2000-01-01T00:00:00Z'); t < at('2070-01-01T00:00:00Z'); t += 5 * DAY + 7 * 3_600_000) {
        const mine = offsetAt?.(t);
        if (mine !== icuOffset(zone, t)) expect({ zone, at: new Date(t).toISOString(), offset: mine }).toEqual({ zone, at: new Date(t).toISOString(), offset: icuOffset(zone, t) });
      }
    }
  });

  it.skipIf(!existsSync(ZIC))('reads slim files (few transitions, the rest from the POSIX rule) as the fat ones, in every zone', () => {
    // Both built here from the same source, so they must agree instant for instant.
    const [slim, fat] = ['slim', 'fat'].map((form) => {
      const dir = mkdtempSync(join(tmpdir(), `tz-${form}-`));
      dirs.push(dir);
      execFileSync(ZIC, ['-b', form, '-d', dir, join(ZONEINFO, 'tzdata.zi')]);
      return dir;
    }) as [string, string];
    let compared = 0;
    for (const path of files(slim)) {
      const fatPath = join(fat, relative(slim, path));
      if (!existsSync(fatPath)) continue;
      const a = parseTzif(readFileSync(path));
      const b = parseTzif(readFileSync(fatPath));
      expect(a, path).not.toBeNull();
      expect(b, fatPath).not.toBeNull();
      // From 2024: zic's slim output differs from its fat one for America/Ojinaga in late 2022
      // (zdump reads both files as this reader does); what matters here is the future.
      for (let t = at('2024-01-01T00:00:00Z'); t < at('2060-01-01T00:00:00Z'); t += 3 * DAY + 5 * 3_600_000) {
        if (a?.(t) !== b?.(t)) expect({ path, at: new Date(t).toISOString(), offset: a?.(t) }).toEqual({ path, at: new Date(t).toISOString(), offset: b?.(t) });
      }
      compared++;
    }
    expect(compared).toBeGreaterThan(300);
  });

  it('falls back to ICU for a name the database has no file for, and knows no made-up zone', () => {
    const empty = mkdtempSync(join(tmpdir(), 'tz-empty-'));
    dirs.push(empty);
    expect(zoneOffsets('Asia/Bangkok', empty)?.(at('2026-11-22T00:00:00Z'))).toBe(7 * 3600);
    expect(zoneOffsets('Mars/Olympus_Mons')).toBeNull();
    expect(zoneOffsets('../../etc/passwd')).toBeNull();
  });

  it('refuses a file that is not TZif, and a damaged one, without throwing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tz-bad-'));
    dirs.push(dir);
    const good = readFileSync(join(ZONEINFO, 'Europe/Berlin'));
    writeFileSync(join(dir, 'Cut'), good.subarray(0, 200));
    writeFileSync(join(dir, 'Text'), 'not a zone\n');
    expect(parseTzif(good.subarray(0, 200))).toBeNull();
    expect(parseTzif(Buffer.from('TZif2'))).toBeNull();
    // Neither file nor ICU knows these names: refused as unknown zones.
    expect(zoneOffsets('Cut', dir)).toBeNull();
    expect(zoneOffsets('Text', dir)).toBeNull();
  });
});

describe('POSIX TZ rules', () => {
  const hours = (h: number): number => h * 3600;
  it('reads northern and southern daylight saving, negative times and names in brackets', () => {
    const berlin = parsePosixTz('CET-1CEST,M3.5.0,M10.5.0/3');
    expect(berlin?.(at('2030-03-31T00:59:59Z'))).toBe(hours(1));
    expect(berlin?.(at('2030-03-31T01:00:00Z'))).toBe(hours(2));
    expect(berlin?.(at('2030-10-27T00:59:59Z'))).toBe(hours(2));
    expect(berlin?.(at('2030-10-27T01:00:00Z'))).toBe(hours(1));
    const sydney = parsePosixTz('AEST-10AEDT,M10.1.0,M4.1.0/3');
    expect(sydney?.(at('2030-01-15T00:00:00Z'))).toBe(hours(11));
    expect(sydney?.(at('2030-06-15T00:00:00Z'))).toBe(hours(10));
    const nuuk = parsePosixTz('<-02>2<-01>,M3.5.0/-1,M10.5.0/0');
    expect(nuuk?.(at('2030-07-01T00:00:00Z'))).toBe(hours(-1));
    expect(nuuk?.(at('2030-01-01T00:00:00Z'))).toBe(hours(-2));
    expect(parsePosixTz('<+0545>-5:45')?.(0)).toBe(hours(5.75));
    // Ireland: winter is the "daylight" time, one hour behind standard.
    const dublin = parsePosixTz('IST-1GMT0,M10.5.0,M3.5.0/1');
    expect(dublin?.(at('2030-01-15T00:00:00Z'))).toBe(0);
    expect(dublin?.(at('2030-07-15T00:00:00Z'))).toBe(hours(1));
    // Daylight saving all year.
    expect(parsePosixTz('EST5EDT,0/0,J365/25')?.(at('2030-07-01T00:00:00Z'))).toBe(hours(-4));
    expect(parsePosixTz('EST5EDT,0/0,J365/25')?.(at('2030-01-01T12:00:00Z'))).toBe(hours(-4));
  });

  it('refuses what is not a rule', () => {
    for (const bad of ['', 'X', 'CET', 'CET-1CEST,M13.5.0,M10.5.0', 'CET-1CEST,M3.5.0', 'CET-1CEST,M3.5.0,M10.5.0,M1.1.1', 'CET-1CEST,Q3,M10.5.0']) {
      expect(parsePosixTz(bad), bad).toBeNull();
    }
  });
});
