import type { LedPattern } from '../core/led-patterns.js';

export interface DemoChairRow {
  key: string;
  deviceId: string;
  status: string;
  remainingSeconds: number | null;
  seated: boolean;
  online: boolean;
  led: LedPattern | null;
  ledOn: boolean;
}

export interface DemoSnapshot {
  site: string;
  vendor: { ok: boolean; cut: boolean; detail: string };
  broker: { connected: boolean; down: boolean };
  backlog: { pending: number; delivered: number };
  statusLed: LedPattern | null;
  statusLedOn: boolean;
  chairs: DemoChairRow[];
  events: string[];
  watch: string;
  color: boolean;
  /** Real seconds a session minute lasts: the demo's clock runs fast so a session ends while you watch. */
  minuteSeconds: number;
}

const STATUS_TEXT: Record<LedPattern, string> = {
  on: 'steady: all well',
  slow: 'slow blink: broker unreachable, buffering',
  fast: 'fast blink: vendor unreachable',
  flash: 'flashes',
  burst: 'bursts: a button or LED line cannot be used',
  off: 'off',
};

const LED_TEXT: Record<LedPattern, string> = {
  on: 'steady: available',
  fast: 'fast blink: starting',
  slow: 'slow blink: running',
  flash: 'flashes: start failed',
  burst: 'bursts',
  off: 'off: unavailable',
};

function remaining(s: number | null): string {
  if (s === null) return '-';
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

/** What the demo's sped-up time means, in one line. */
export function timeLine(minuteSeconds: number): string {
  if (minuteSeconds === 60) return 'time: real (a session minute is a minute)';
  return `time: sped up ${Math.round(60 / minuteSeconds)}x (a session minute lasts ${minuteSeconds} s; --minute-seconds 60 for real time)`;
}

/** One chair as a line of the demo's table; without colour, what a log without a terminal shows. */
export function chairLine(ch: DemoChairRow, color: boolean): string {
  const c = (code: string, text: string): string => (color ? `\x1b[${code}m${text}\x1b[0m` : text);
  const symbol = ch.ledOn ? '●' : '○';
  const bulb = color ? c(ch.ledOn ? (ch.led === 'flash' ? '31' : '32') : '90', symbol) : symbol;
  const status = ch.online ? ch.status : c('90', `${ch.status || '?'} (offline)`);
  return ` [${ch.key}]  ${ch.deviceId.padEnd(8)}  ${status.padEnd(ch.online ? 11 : 11 + (color ? 9 : 0))}  ${remaining(ch.remainingSeconds).padEnd(6)}  ${(ch.seated ? 'yes' : 'no').padEnd(6)}  ${bulb} ${ch.led ? LED_TEXT[ch.led] : ''}`;
}

/** The demo's screen, as lines; pure so it can be tested without a terminal. */
export function renderView(s: DemoSnapshot): string[] {
  const c = (code: string, text: string): string => (s.color ? `\x1b[${code}m${text}\x1b[0m` : text);
  const bulb = (on: boolean, pattern: LedPattern | null): string => {
    const symbol = on ? '●' : '○';
    if (!s.color) return symbol;
    return c(on ? (pattern === 'flash' ? '31' : '32') : '90', symbol);
  };
  const vendor = s.vendor.cut ? c('31', 'CUT (press v)') : s.vendor.ok ? c('32', 'reachable') : c('33', `unreachable: ${s.vendor.detail}`);
  const broker = s.broker.down ? c('31', 'STOPPED (press b)') : s.broker.connected ? c('32', 'connected') : c('33', 'reconnecting, buffering');
  const lines = [
    c('1', `chair-agent demo  ·  site ${s.site}`),
    `vendor: ${vendor}   broker: ${broker}   backlog: ${s.backlog.pending} waiting, ${s.backlog.delivered} delivered`,
    `status LED ${bulb(s.statusLedOn, s.statusLed)} ${s.statusLed ? STATUS_TEXT[s.statusLed] : ''}`,
    timeLine(s.minuteSeconds),
    '',
    c('1', ' key  chair     status       left    seated  LED'),
  ];
  for (const ch of s.chairs) lines.push(chairLine(ch, s.color));
  lines.push('', c('1', 'last events'));
  for (const e of s.events.slice(-8)) lines.push(`  ${e}`);
  for (let i = s.events.length; i < 8; i++) lines.push('');
  lines.push(
    '',
    `keys: ${c('1', '1')}-${c('1', String(s.chairs.length))} press a chair's button · ${c('1', 'p')} paid use · ${c('1', 'v')} cut/restore vendor uplink · ${c('1', 'b')} stop/restore broker · ${c('1', 'q')} quit`,
    `watch from outside: ${s.watch}`,
  );
  return lines;
}
