import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import type { Clock, Timer } from '../../agent/platform/clock.js';
import type { Bias, ChipInfo, GpiodBinding, LineConfig, LineEvent, LineInfo } from '../../agent/gpio/gpiod-binding.js';
import { ROOT } from './cli.js';

interface FakeLine {
  name: string;
  /** A holder other than the agent (from the fixture: an overlay, a driver). */
  holder: string;
  holderDirection: 'input' | 'output';
  /** The physical level on the pin: a pulled-up button reads 1 at rest. */
  level: 0 | 1;
}

interface Request {
  fd: number;
  chip: string;
  offset: number;
  config: LineConfig;
  onEvents: ((events: LineEvent[], error?: Error & { code?: string }) => void) | null;
  pending: Timer | null;
  /** The line's event sequence number, as the kernel counts it (gaps: events its buffer dropped). */
  seqno: number;
  /** The debounced logical value the kernel last reported. */
  reported: 0 | 1;
  writes: (0 | 1)[];
}

const errno = (code: string, message: string): Error => Object.assign(new Error(`${message}: ${code}`), { code });

/**
 * The kernel's GPIO character device as the addon sees it, for a board described by a fixture:
 * `gpiodetect` and `gpioinfo` (libgpiod 2.x) output, as an installer would paste them. Lines have
 * names and holders; requests take bias, active-low, edges and debounce; a pin's physical level
 * turns into edge events once it has been steady for the debounce period (on the given clock).
 */
export class FakeGpiod implements GpiodBinding {
  readonly devDir: string;
  private readonly chips = new Map<string, { info: ChipInfo; lines: FakeLine[] }>();
  private readonly requests = new Map<number, Request>();
  private nextFd = 100;
  /** Makes every chip refuse to open, as for a user outside group gpio. */
  denied = false;
  /** Makes watch() throw this errno, as uv_poll_init or uv_poll_start would. */
  watchFails: string | null = null;

  constructor(
    fixture: string,
    private readonly clock: Clock,
  ) {
    const text = readFileSync(join(ROOT, 'test', 'fixtures', 'gpioinfo', fixture), 'utf8');
    const labels = new Map<string, string>();
    for (const m of text.matchAll(/^(gpiochip\d+) \[(.+)\] \((\d+) lines\)$/gm)) labels.set(m[1] as string, m[2] as string);
    let current: FakeLine[] | null = null;
    for (const line of text.split('\n')) {
      const head = /^(gpiochip\d+) - (\d+) lines:$/.exec(line);
      if (head) {
        current = [];
        const name = head[1] as string;
        this.chips.set(name, { info: { name, label: labels.get(name) ?? '', lines: Number(head[2]) }, lines: current });
        continue;
      }
      const l = /^\tline\s+\d+:\t(?:"([^"]*)"|unnamed)\s*\t(input|output)(?: [^c]\S*)*(?: consumer="([^"]*)")?/.exec(line);
      if (l && current) current.push({ name: l[1] ?? '', holder: l[3] ?? '', holderDirection: l[2] as 'input' | 'output', level: 1 });
    }
    this.devDir = mkdtempSync(join(tmpdir(), 'fake-dev-'));
    for (const name of this.chips.keys()) writeFileSync(join(this.devDir, name), '');
  }

  private chip(path: string): { info: ChipInfo; lines: FakeLine[] } {
    if (this.denied) throw errno('EACCES', `cannot open ${path}`);
    const chip = this.chips.get(basename(path));
    if (!chip) throw errno('ENOENT', `cannot open ${path}`);
    return chip;
  }

  private requestOf(chip: string, offset: number): Request | undefined {
    return [...this.requests.values()].find((r) => r.chip === chip && r.offset === offset);
  }

  chipInfo(path: string): ChipInfo {
    return { ...this.chip(path).info };
  }

  lineInfo(path: string, offset: number): LineInfo {
    const chip = this.chip(path);
    const line = chip.lines[offset];
    if (!line) throw errno('EINVAL', 'no such line');
    const req = this.requestOf(chip.info.name, offset);
    return {
      offset,
      name: line.name,
      consumer: req ? req.config.consumer : line.holder,
      used: req !== undefined || line.holder !== '',
      direction: req ? req.config.direction : line.holderDirection,
      activeLow: req?.config.activeLow ?? false,
      bias: (req?.config.bias ?? 'as-is') as Bias,
      edge: req?.config.edge ?? 'none',
      debounceUs: req?.config.debounceUs ?? 0,
    };
  }

  request(path: string, offset: number, config: LineConfig): number {
    const chip = this.chip(path);
    const line = chip.lines[offset];
    if (!line) throw errno('EINVAL', 'no such line');
    if (line.holder !== '' || this.requestOf(chip.info.name, offset)) throw errno('EBUSY', `cannot request a line of ${path}`);
    const fd = this.nextFd++;
    const logical = (config.activeLow ? 1 - line.level : line.level) as 0 | 1;
    this.requests.set(fd, { fd, chip: chip.info.name, offset, config, onEvents: null, pending: null, seqno: 0, reported: logical, writes: config.direction === 'output' ? [config.value ?? 0] : [] });
    return fd;
  }

  private req(fd: number): Request {
    const r = this.requests.get(fd);
    if (!r) throw errno('EBADF', 'not a line');
    return r;
  }

  getValue(fd: number): 0 | 1 {
    const r = this.req(fd);
    return r.config.direction === 'output' ? (r.writes.at(-1) ?? 0) : r.reported;
  }

  setValue(fd: number, value: 0 | 1): void {
    const r = this.req(fd);
    if (r.config.direction !== 'output') throw errno('EPERM', 'not an output');
    r.writes.push(value);
  }

  watch(fd: number, onEvents: (events: LineEvent[], error?: Error & { code?: string }) => void): unknown {
    const r = this.req(fd);
    if (this.watchFails) throw errno(this.watchFails, 'cannot watch a line');
    r.onEvents = onEvents;
    return { fd };
  }

  unwatch(watcher: unknown): void {
    const r = this.requests.get((watcher as { fd: number }).fd);
    if (!r) return;
    r.onEvents = null;
    r.pending?.cancel();
  }

  release(fd: number): void {
    this.requests.get(fd)?.pending?.cancel();
    this.requests.delete(fd);
  }

  // The test's side: what a finger, a bouncing contact or a meter would do.

  /** The chip and offset the fixture gives a name. */
  find(name: string): { chip: string; offset: number } {
    for (const [chip, { lines }] of this.chips) {
      const offset = lines.findIndex((l) => l.name === name);
      if (offset >= 0) return { chip, offset };
    }
    throw new Error(`no line named ${name} in the fixture`);
  }

  /** Sets a pin's physical level; the kernel reports an edge once it has been steady for the debounce time. */
  setLevel(chip: string, offset: number, level: 0 | 1): void {
    const line = this.chips.get(chip)?.lines[offset];
    if (!line) throw new Error(`no line ${chip}:${offset}`);
    line.level = level;
    const r = this.requestOf(chip, offset);
    if (!r || r.config.direction !== 'input') return;
    r.pending?.cancel();
    r.pending = this.clock.setTimeout(() => {
      r.pending = null;
      const logical = (r.config.activeLow ? 1 - line.level : line.level) as 0 | 1;
      if (logical === r.reported) return;
      r.reported = logical;
      const rising = logical === 1;
      const wanted = r.config.edge === 'both' || (r.config.edge === 'rising' && rising) || (r.config.edge === 'falling' && !rising);
      if (wanted) r.onEvents?.([{ rising, timestampMs: this.clock.monotonic(), seqno: ++r.seqno }]);
    }, (r.config.debounceUs ?? 0) / 1000);
  }

  /** The kernel's event buffer of the line dropped `n` events: the next one's seqno jumps. */
  dropEvents(chip: string, offset: number, n: number): void {
    const r = this.requestOf(chip, offset);
    if (r) r.seqno += n;
  }

  /**
   * The chip goes away (a HAT unplugged, a driver unbound): as the addon reports it, every watcher
   * of its lines gets ENODEV once and stops.
   */
  removeChip(chip: string): void {
    for (const r of this.requests.values()) {
      if (r.chip !== chip || !r.onEvents) continue;
      const onEvents = r.onEvents;
      r.onEvents = null;
      r.pending?.cancel();
      onEvents([], errno('ENODEV', "reading the line's events failed"));
    }
  }

  /** A button to ground held for `holdMs`, with a bounce on the way down. */
  async press(chip: string, offset: number, holdMs: number, advance: (ms: number) => Promise<void>): Promise<void> {
    this.setLevel(chip, offset, 0);
    await advance(2);
    this.setLevel(chip, offset, 1); // a bounce
    await advance(2);
    this.setLevel(chip, offset, 0);
    await advance(holdMs);
    this.setLevel(chip, offset, 1);
    await advance(100);
  }

  /** What the agent asked of the line, and what it wrote to it. */
  requestAt(chip: string, offset: number): { config: LineConfig; writes: (0 | 1)[] } | undefined {
    const r = this.requestOf(chip, offset);
    return r ? { config: r.config, writes: r.writes } : undefined;
  }

  get open(): number {
    return this.requests.size;
  }
}
