import { registryFor } from '../../core/registry-from-config.js';
import { startServiceFor } from '../../start/start-service-from-config.js';
import { vendorFromConfig } from '../../vendor/vendor-from-config.js';
import { systemClock } from '../../platform/clock.js';
import { createLogger } from '../../platform/logger.js';
import { errorMessage } from '../../platform/errors.js';
import { intOption, UsageError, type ParsedArgs } from '../args.js';
import { EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, type CommandContext } from '../context.js';
import { loadForCommand } from '../load-config.js';
import { secretValues } from '../secrets.js';

/**
 * One start through the daemon's own path: the chair list is read once to know the chair's
 * state (the same rules as a button press), then the StartService makes its one control call
 * and confirms. Nothing else of the agent (GPIO, broker, database) is touched.
 */
export async function startCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  const [deviceId, ...extra] = args.positionals;
  if (!deviceId || extra.length > 0) throw new UsageError('start takes exactly one DEVICE_ID');
  const loaded = await loadForCommand(args.config, ctx, `start ${deviceId}`);
  if (!loaded) return EXIT_CONFIG;
  const { config } = loaded;
  const minutes = intOption(args.values, 'minutes', config.start.minMinutes, config.start.maxMinutes);
  const logger = createLogger({ level: 'silent', secrets: secretValues(config) });
  const clock = systemClock;
  const vendor = vendorFromConfig(config, clock, logger);
  const registry = registryFor(config);
  const starts = startServiceFor(config, { vendor, registry, clock, logger });
  const json = args.values['json'] === true;
  try {
    try {
      const list = await vendor.listChairs();
      registry.applyList(list.chairs, clock.monotonic());
    } catch (err) {
      const message = `cannot read the chair list: ${errorMessage(err)}`;
      ctx.stdout(json ? `${JSON.stringify({ status: 'error', deviceId, error: 'vendor_unreachable', message })}\n` : `${deviceId}: not started: ${message}\n`);
      return EXIT_FAILURE;
    }
    const outcome = await starts.startChair(deviceId, { minutes, source: 'cli' });
    if (json) {
      ctx.stdout(`${JSON.stringify(outcome.ok ? { status: 'ok', deviceId, minutes: outcome.minutes } : { status: 'error', deviceId, error: outcome.error, message: outcome.message })}\n`);
    } else if (outcome.ok) {
      ctx.stdout(`${deviceId}: started for ${outcome.minutes} minute(s); the chair reports running\n`);
    } else {
      ctx.stdout(`${deviceId}: not started: ${outcome.error} (${outcome.message})\n`);
    }
    return outcome.ok ? EXIT_OK : EXIT_FAILURE;
  } finally {
    await vendor.close();
  }
}
