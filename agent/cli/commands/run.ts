import type { DestinationStream } from 'pino';
import { build } from '../../build.js';
import { createLogger } from '../../logger.js';
import { errorMessage } from '../../errors.js';
import type { ParsedArgs } from '../args.js';
import { EXIT_FAILURE, EXIT_OK, type CommandContext } from '../context.js';
import { loadForCommand } from '../load-config.js';
import { EXIT_CONFIG } from '../context.js';
import { secretValues } from '../secrets.js';

async function prettyDestination(ctx: CommandContext): Promise<DestinationStream | undefined> {
  try {
    const mod = (await import('pino-pretty')) as unknown as { default: (o: object) => DestinationStream };
    return mod.default({ colorize: ctx.stdoutIsTTY, translateTime: 'SYS:standard', ignore: 'pid,hostname' });
  } catch {
    ctx.stderr('chair-agent: --pretty needs pino-pretty (npm i pino-pretty); logging JSON instead\n');
    return undefined;
  }
}

export async function runCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  const loaded = loadForCommand(args.config, ctx);
  if (!loaded) return EXIT_CONFIG;
  const { config } = loaded;
  const destination = args.values['pretty'] === true ? await prettyDestination(ctx) : undefined;
  const logger = createLogger({ level: config.log.level, destination, secrets: secretValues(config) });
  const agent = build(config, { logger });
  try {
    await agent.start();
  } catch (err) {
    logger.fatal({ err: errorMessage(err) }, 'agent failed to start');
    logger.flush();
    return EXIT_FAILURE;
  }
  await new Promise<void>((resolve) => {
    if (ctx.signal.aborted) resolve();
    else ctx.signal.addEventListener('abort', () => resolve(), { once: true });
  });
  logger.info({ reason: String(ctx.signal.reason ?? 'signal') }, 'stopping');
  await agent.stop();
  logger.info('stopped');
  logger.flush();
  return EXIT_OK;
}
