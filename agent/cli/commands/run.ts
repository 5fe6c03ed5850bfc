import type { DestinationStream } from 'pino';
import { build } from '../../build.js';
import { createLogger } from '../../platform/logger.js';
import { streamLogSink } from '../../platform/log-sink.js';
import { errorMessage } from '../../platform/errors.js';
import type { ParsedArgs } from '../args.js';
import { EXIT_FAILURE, EXIT_OK, type CommandContext } from '../context.js';
import type { LoadedConfig } from '../../config/load.js';
import { loadForCommand } from '../load-config.js';
import { EXIT_CONFIG } from '../context.js';
import { secretValues } from '../secrets.js';
import { serviceNotifier } from '../../platform/systemd-notify.js';
import { within } from '../../platform/clock.js';
import type { Agent } from '../../build.js';
import { CHECK_NAMES } from '../../observe/health.js';

/** The one-line STATUS= for `systemctl status`. */
function statusLine(agent: Agent): string {
  const failing = CHECK_NAMES.filter((n) => !agent.health.get(n).ok);
  const chairs = agent.registry.views().filter((v) => v.online).length;
  return failing.length === 0 ? `ok: ${chairs} chair(s) online` : `degraded: ${failing.map((n) => `${n}: ${agent.health.get(n).detail}`).join('; ')}`;
}

async function prettyDestination(ctx: CommandContext): Promise<DestinationStream | undefined> {
  try {
    const mod = (await import('pino-pretty')) as unknown as { default: (o: object) => DestinationStream };
    return mod.default({ colorize: ctx.stdoutIsTTY, translateTime: 'SYS:standard', ignore: 'pid,hostname' });
  } catch {
    ctx.stderr('chair-agent: --pretty needs pino-pretty (npm i pino-pretty); logging JSON instead\n');
    return undefined;
  }
}

/** `loading`: the config load already under way (main.ts starts it before importing this module). */
export async function runCommand(args: ParsedArgs, ctx: CommandContext, loading?: Promise<LoadedConfig | null>): Promise<number> {
  const loaded = await (loading ?? loadForCommand(args.config, ctx, args.verb, true));
  if (!loaded) return EXIT_CONFIG;
  const { config } = loaded;
  const pretty = args.values['pretty'] === true ? await prettyDestination(ctx) : undefined;
  const sink = pretty || !ctx.logOutput ? undefined : streamLogSink(ctx.logOutput(), { reopen: ctx.logOutput, journal: ctx.stdoutIsJournal === true });
  const destination = pretty ?? sink;
  const logger = createLogger({ level: config.log.level, destination, secrets: secretValues(config) });
  const nodeLog = logger.child({ component: 'node' });
  // An experimental API in use (undici's SOCKS5) is news, not trouble.
  ctx.onWarning?.((warning) => nodeLog[warning.name === 'ExperimentalWarning' ? 'info' : 'warn']({ warning: warning.name, code: (warning as { code?: unknown }).code }, warning.message));
  const agent = build(config, { logger });
  const notifier = serviceNotifier(ctx.env, logger.child({ component: 'systemd' }), agent.clock, ctx.pid);
  try {
    await agent.start();
  } catch (err) {
    logger.fatal({ err: errorMessage(err) }, 'agent failed to start');
    logger.flush();
    await sink?.flushed();
    sink?.close();
    return EXIT_FAILURE;
  }
  // READY once the database and the listener are up and the broker has been tried once.
  await within(agent.clock, agent.broker.firstAttempt(), 15_000);
  notifier.ready(statusLine(agent));
  notifier.startWatchdog();
  const onHealth = (): void => notifier.status(statusLine(agent));
  agent.health.on('change', onHealth);
  await new Promise<void>((resolve) => {
    if (ctx.signal.aborted) resolve();
    else ctx.signal.addEventListener('abort', () => resolve(), { once: true });
  });
  agent.health.off('change', onHealth);
  logger.info({ reason: String(ctx.signal.reason ?? 'signal') }, 'stopping');
  notifier.stopping();
  await agent.stop();
  notifier.stopWatchdog();
  logger.info('stopped');
  ctx.onWarning?.(null);
  logger.flush();
  await sink?.flushed();
  sink?.close();
  return EXIT_OK;
}
