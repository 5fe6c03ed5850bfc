import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { packageRoot } from '../platform/version.js';

/**
 * The port the gpiod driver uses: the kernel's GPIO character device (uAPI v2), as the addon
 * native/gpiod/chair_gpiod.c exposes it. Tests pass a fake that behaves like it.
 */
export interface ChipInfo {
  name: string;
  label: string;
  lines: number;
}

export type Bias = 'pull-up' | 'pull-down' | 'disabled' | 'as-is';

export interface LineInfo {
  offset: number;
  name: string;
  consumer: string;
  used: boolean;
  direction: 'input' | 'output';
  activeLow: boolean;
  bias: Bias;
  edge: 'none' | 'rising' | 'falling' | 'both';
  debounceUs: number;
}

export interface LineConfig {
  consumer: string;
  direction: 'input' | 'output';
  activeLow?: boolean;
  bias?: Bias;
  edge?: 'none' | 'rising' | 'falling' | 'both';
  debounceUs?: number;
  /** Initial value of an output. */
  value?: 0 | 1;
}

export interface LineEvent {
  /** Inactive to active (a press, when the line is requested active-low for a button to ground). */
  rising: boolean;
  /** Kernel timestamp (CLOCK_MONOTONIC), milliseconds. */
  timestampMs: number;
  seqno: number;
}

export interface GpiodBinding {
  chipInfo(path: string): ChipInfo;
  lineInfo(path: string, offset: number): LineInfo;
  /** Requests one line; returns its file descriptor. Throws an Error with an errno `code`. */
  request(path: string, offset: number, config: LineConfig): number;
  getValue(fd: number): 0 | 1;
  setValue(fd: number, value: 0 | 1): void;
  /**
   * Calls `onEvents` with each batch of edge events. If polling or reading the line fails (the
   * chip went away), the watcher stops and `onEvents` gets the events read before and the error
   * (with an errno `code`), once. A gap in `seqno` means the kernel's event buffer overflowed.
   */
  watch(fd: number, onEvents: (events: LineEvent[], error?: Error & { code?: string }) => void): unknown;
  unwatch(watcher: unknown): void;
  release(fd: number): void;
}

/** The addon built for this machine: native/prebuilds/linux-<arch>/chair_gpiod.node beside the package. */
export function addonPath(arch: string = process.arch): string | null {
  const root = packageRoot();
  return root === null ? null : join(root, 'native', 'prebuilds', `linux-${arch}`, 'chair_gpiod.node');
}

export function loadGpiodBinding(): GpiodBinding {
  const path = addonPath();
  if (path === null) throw new Error('cannot find the chair-agent package folder');
  return createRequire(import.meta.url)(path) as GpiodBinding;
}

/** /dev/gpiochip* in name order. */
export function chipPaths(devDir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(devDir).filter((n) => /^gpiochip\d+$/.test(n));
  } catch {
    return [];
  }
  return names.sort((a, b) => Number(a.slice(8)) - Number(b.slice(8))).map((n) => join(devDir, n));
}
