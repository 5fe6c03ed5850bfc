import { readFileSync } from 'node:fs';
import type { Config } from '../config/schema.js';

export type LineRole = 'button' | 'LED' | 'status LED';

export interface ConfiguredLine {
  /** The chair it belongs to; "agent" for the status LED. */
  owner: string;
  role: LineRole;
  bcm: number;
}

/** Every line the config uses, in the order of the config (the wiring test's rows). */
export function configuredLines(config: Config): ConfiguredLine[] {
  const out: ConfiguredLine[] = [];
  if (config.gpio.statusLed !== undefined) out.push({ owner: 'agent', role: 'status LED', bcm: config.gpio.statusLed });
  for (const c of config.gpio.chairs) {
    if (c.button !== undefined) out.push({ owner: c.deviceId, role: 'button', bcm: c.button });
    if (c.led !== undefined) out.push({ owner: c.deviceId, role: 'LED', bcm: c.led });
  }
  return out;
}

export interface OverlayPins {
  /** What claims the pins: "I2C (dtparam=i2c_arm=on)". */
  what: string;
  pins: number[];
  line: number;
}

/**
 * Header pins claimed by interfaces enabled in the Pi's boot config (/boot/firmware/config.txt;
 * /boot/config.txt before Bookworm): a button or LED on one of them is taken by its driver.
 */
export function overlayPins(text: string): OverlayPins[] {
  const out: OverlayPins[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.replace(/#.*/, '').trim();
    if (line === '' || line.startsWith('[')) return;
    const at = i + 1;
    const on = (v: string | undefined): boolean => v === undefined || v === 'on' || v === '1' || v === 'true';
    for (const m of line.matchAll(/(?:^dtparam=|,)(i2c_arm|i2c|spi|i2s|audio)(?:=(\w+))?/g)) {
      if (!on(m[2])) continue;
      if (m[1] === 'i2c_arm' || m[1] === 'i2c') out.push({ what: `I2C (${line})`, pins: [2, 3], line: at });
      if (m[1] === 'spi') out.push({ what: `SPI (${line})`, pins: [7, 8, 9, 10, 11], line: at });
      if (m[1] === 'i2s') out.push({ what: `I2S (${line})`, pins: [18, 19, 20, 21], line: at });
    }
    const uart = /^enable_uart=(\d)/.exec(line);
    if (uart && uart[1] === '1') out.push({ what: `UART (${line})`, pins: [14, 15], line: at });
    const overlay = /^dtoverlay=([\w-]+)(?:,(.*))?$/.exec(line);
    if (overlay) {
      const name = overlay[1] as string;
      const params = Object.fromEntries((overlay[2] ?? '').split(',').filter(Boolean).map((p) => p.split('=') as [string, string]));
      const num = (k: string, d: number): number => (params[k] !== undefined && /^\d+$/.test(params[k] as string) ? Number(params[k]) : d);
      if (name === 'w1-gpio' || name === 'w1-gpio-pullup') out.push({ what: `1-Wire (${line})`, pins: [num('gpiopin', 4)], line: at });
      else if (name === 'gpio-shutdown') out.push({ what: `shutdown button (${line})`, pins: [num('gpio_pin', 3)], line: at });
      else if (/^spi1-\dcs/.test(name)) out.push({ what: `SPI1 (${line})`, pins: [19, 20, 21, 18, 17, 16].slice(0, 3 + Number(name[5])), line: at });
      else if (/^uart[2-5]$/.test(name)) {
        const base = { uart2: 0, uart3: 4, uart4: 8, uart5: 12 }[name] as number;
        out.push({ what: `UART (${line})`, pins: [base, base + 1], line: at });
      } else if (name === 'pwm' || name === 'pwm-2chan') out.push({ what: `PWM (${line})`, pins: name === 'pwm' ? [num('pin', 18)] : [num('pin', 18), num('pin2', 19)], line: at });
      else if (/^i2c\d/.test(name)) out.push({ what: `I2C (${line})`, pins: [num('sda', -1), num('scl', -1)].filter((p) => p >= 0), line: at });
    }
  });
  return out.filter((o) => o.pins.length > 0);
}

export const BOOT_CONFIGS = ['/boot/firmware/config.txt', '/boot/config.txt'];

/** The Pi's boot config and its path, if this machine has one. */
export function readBootConfig(paths: readonly string[] = BOOT_CONFIGS): { path: string; text: string } | null {
  for (const path of paths) {
    try {
      return { path, text: readFileSync(path, 'utf8') };
    } catch {
      // next
    }
  }
  return null;
}
