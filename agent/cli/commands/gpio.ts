import { existsSync } from 'node:fs';
import { buttonBias, gpioFromConfig } from '../../gpio/gpio-from-config.js';
import { systemClock, type Clock } from '../../platform/clock.js';
import { errorMessage } from '../../platform/errors.js';
import type { GpioDriver, GpioInput, GpioOutput } from '../../gpio/gpio-driver.js';
import { CONSUMER } from '../../gpio/gpiod-driver.js';
import { configuredLines, type ConfiguredLine } from '../../gpio/wiring.js';
import { silentLogger } from '../../platform/logger.js';
import type { ParsedArgs } from '../args.js';
import { EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, type CommandContext } from '../context.js';
import { loadForCommand } from '../load-config.js';

const HELD = 'the chair-agent service holds the GPIO lines: sudo systemctl stop chair-agent, run chair-agent gpio again, then sudo systemctl start chair-agent';
const BLINK_MS = 1_000;

export interface GpioCommandDeps {
  driver?: GpioDriver;
  clock?: Clock;
  sysfsRoot?: string;
}

const label = (l: ConfiguredLine): string => (l.role === 'status LED' ? 'status LED' : `${l.role} of ${l.owner}`);

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ').trimEnd()).join('\n');
}

/** True when the running service (not this command) holds a configured line. */
function heldByService(driver: GpioDriver, lines: readonly ConfiguredLine[], sysfsRoot: string, base: number | undefined): boolean {
  if (driver.kind === 'gpiod') return lines.some((l) => driver.inspect?.(l.bcm)?.consumer === CONSUMER);
  // sysfs: a configured line already exported is the service's (it unexports them when it stops).
  return driver.kind === 'onoff' && lines.some((l) => existsSync(`${sysfsRoot}/gpio${(base ?? 0) + l.bcm}`));
}

/**
 * `chair-agent gpio [--blink]`: the wiring test for installers. Lists every configured line as
 * the kernel has it (chair, role, BCM, chip, line, name, bias, level); with --blink lights each
 * LED in turn for a second and names it; then prints every button press with its chair and how
 * long it was held, until Ctrl-C, which releases every line. Refuses while the service holds them.
 */
export async function gpioCommand(args: ParsedArgs, ctx: CommandContext, deps: GpioCommandDeps = {}): Promise<number> {
  const loaded = await loadForCommand(args.config, ctx, args.verb);
  if (!loaded) return EXIT_CONFIG;
  const { config } = loaded;
  const clock = deps.clock ?? systemClock;
  const lines = configuredLines(config);
  if (lines.length === 0) {
    ctx.stdout('no GPIO lines configured (gpio.chairs[].button / .led, gpio.statusLed)\n');
    return EXIT_OK;
  }
  if (config.gpio.driver === 'sim' && !deps.driver) {
    ctx.stderr('chair-agent: gpio.driver is sim: there are no wires to test; set gpio.driver: gpiod (or onoff) on the Pi\n');
    return EXIT_FAILURE;
  }
  const driver = deps.driver ?? gpioFromConfig(config, clock, silentLogger());
  try {
    await driver.init();
  } catch (err) {
    ctx.stderr(`chair-agent: GPIO unavailable: ${errorMessage(err)}\n`);
    return EXIT_FAILURE;
  }
  const sysfsRoot = deps.sysfsRoot ?? '/sys/class/gpio';
  if (heldByService(driver, lines, sysfsRoot, config.gpio.chipBase)) {
    ctx.stderr(`chair-agent: ${HELD}\n`);
    return EXIT_FAILURE;
  }

  const inputs: GpioInput[] = [];
  const outputs = new Map<ConfiguredLine, GpioOutput>();
  const problems: string[] = [];
  const pressedAt = new Map<number, number>();
  try {
    for (const l of lines) {
      try {
        if (l.role === 'button') {
          inputs.push(
            driver.openInput(
              l.bcm,
              { activeLow: config.gpio.activeLow, debounceMs: config.gpio.debounceMs, bias: buttonBias(config) },
              () => undefined,
              (pressed, at) => {
                if (pressed) {
                  pressedAt.set(l.bcm, at);
                  ctx.stdout(`  ${l.owner} button (BCM ${l.bcm}): pressed\n`);
                } else {
                  const since = pressedAt.get(l.bcm);
                  pressedAt.delete(l.bcm);
                  ctx.stdout(`  ${l.owner} button (BCM ${l.bcm}): released${since === undefined ? '' : `, held ${((at - since) / 1000).toFixed(2)} s`}\n`);
                }
              },
            ),
          );
        } else {
          outputs.set(l, driver.openOutput(l.bcm));
        }
      } catch (err) {
        if (errorMessage(err).includes(`"${CONSUMER}"`)) {
          ctx.stderr(`chair-agent: ${HELD}\n`);
          return EXIT_FAILURE;
        }
        problems.push(`${label(l)} (BCM ${l.bcm}): ${errorMessage(err)}`);
      }
    }

    const rows = [['chair', 'role', 'BCM', 'chip', 'line', 'name', 'bias', 'level']];
    for (const l of lines) {
      const d = driver.inspect?.(l.bcm);
      const failed = problems.some((p) => p.startsWith(`${label(l)} (BCM ${l.bcm})`));
      const level = failed ? 'UNUSABLE' : l.role === 'button' ? (d?.level === 1 ? 'pressed' : d?.level === 0 ? 'released' : '?') : 'off';
      rows.push([l.owner, l.role, String(l.bcm), d?.chip ?? driver.kind, d ? String(d.offset) : '-', d?.name || '-', l.role === 'button' ? (d?.bias ?? buttonBias(config)) : '-', level]);
    }
    ctx.stdout(`${driver.kind} driver; the lines as the kernel has them:\n\n${table(rows)}\n`);
    for (const p of problems) ctx.stdout(`\nPROBLEM ${p}\n`);

    if (args.values['blink'] === true) {
      ctx.stdout(`\nLighting each LED for ${BLINK_MS / 1000} s:\n`);
      for (const [l, out] of outputs) {
        if (ctx.signal.aborted) break;
        ctx.stdout(`  ${label(l)} (BCM ${l.bcm}): on`);
        out.write(true);
        await clock.sleep(BLINK_MS, ctx.signal).catch(() => undefined);
        out.write(false);
        ctx.stdout(', off\n');
      }
    }
    const buttons = lines.filter((l) => l.role === 'button').length - problems.filter((p) => p.startsWith('button')).length;
    if (buttons > 0 && !ctx.signal.aborted) {
      ctx.stdout(`\nWatching ${buttons} button(s): press each one; Ctrl-C to stop.\n`);
      await new Promise<void>((resolve) => {
        if (ctx.signal.aborted) resolve();
        else ctx.signal.addEventListener('abort', () => resolve(), { once: true });
      });
    }
    ctx.stdout('lines released\n');
    return problems.length > 0 ? EXIT_FAILURE : EXIT_OK;
  } finally {
    for (const i of inputs) i.close();
    for (const o of outputs.values()) {
      o.write(false);
      o.close();
    }
    driver.close();
  }
}
