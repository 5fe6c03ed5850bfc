import type { ChairReading } from '../vendor/vendor-api.js';
import { vendorTimeToIso } from '../time/vendor-time.js';

/** A chair as the agent publishes it on B/chairs/<DeviceId>. */
export interface ChairState {
  deviceId: string;
  deviceCode: string | null;
  deviceName: string | null;
  location: string | null;
  /** The vendor's Status, verbatim. */
  status: string;
  running: boolean;
  seated: boolean;
  remainingSeconds: number | null;
  firmwareVersion: string | null;
  /** The vendor's ServerTime as ISO 8601 with the site's offset (verbatim when unreadable). */
  serverTime: string | null;
  /** True when a start would be accepted by the vendor: the agent's own reading, see startable(). */
  startable: boolean;
}

/**
 * Remaining time from LeftMin/LeftSec, whose exact meaning the vendor does not give. LeftSec is
 * read as the seconds part (0-59) of LeftMin:LeftSec, unless it is already the whole remaining
 * time (it is 60 or more, or it falls inside LeftMin's minute).
 */
export function remainingSeconds(leftMin: number | null, leftSec: number | null): number | null {
  if (leftMin === null && leftSec === null) return null;
  const min = Math.max(0, leftMin ?? 0);
  const sec = Math.max(0, leftSec ?? 0);
  if (leftMin === null) return Math.round(sec);
  if (leftSec === null) return Math.round(min * 60);
  const isTotal = sec >= 60 || (min > 0 && sec >= min * 60 && sec < min * 60 + 60);
  return Math.round(isTotal ? sec : min * 60 + sec);
}

export interface StateOptions {
  timeZone: string;
  /** Status values that mean "idle, may be started" (case-insensitive). */
  availableStatuses: readonly string[];
}

export function chairStateFrom(reading: ChairReading, options: StateOptions): ChairState {
  const remaining = remainingSeconds(reading.leftMin, reading.leftSec);
  const running = remaining !== null && remaining > 0;
  const idle = options.availableStatuses.some((s) => s.toLowerCase() === reading.status.toLowerCase());
  return {
    deviceId: reading.deviceId,
    deviceCode: reading.deviceCode,
    deviceName: reading.deviceName,
    location: reading.location,
    status: reading.status,
    running,
    seated: reading.seated,
    remainingSeconds: remaining,
    firmwareVersion: reading.firmwareVersion,
    serverTime: reading.serverTime === null ? null : (vendorTimeToIso(reading.serverTime, options.timeZone) ?? reading.serverTime),
    startable: idle && !running,
  };
}

/** Whether two vendor readings of a chair are the same in everything but ServerTime. */
export function sameReading(a: ChairReading, b: ChairReading): boolean {
  return (
    a.status === b.status &&
    a.seated === b.seated &&
    a.leftMin === b.leftMin &&
    a.leftSec === b.leftSec &&
    a.firmwareVersion === b.firmwareVersion &&
    a.deviceName === b.deviceName &&
    a.deviceCode === b.deviceCode &&
    a.location === b.location
  );
}

/**
 * Whether two states differ in anything a subscriber cares about. serverTime is left out on
 * purpose: it moves on every poll and would turn every poll into a publish.
 */
export function sameChairState(a: ChairState, b: ChairState): boolean {
  return (
    a.status === b.status &&
    a.running === b.running &&
    a.seated === b.seated &&
    a.remainingSeconds === b.remainingSeconds &&
    a.firmwareVersion === b.firmwareVersion &&
    a.deviceName === b.deviceName &&
    a.deviceCode === b.deviceCode &&
    a.location === b.location &&
    a.startable === b.startable
  );
}
