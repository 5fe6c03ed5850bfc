import { maskedConfigYaml } from '../../config/mask.js';
import type { ParsedArgs } from '../args.js';
import { EXIT_CONFIG, EXIT_OK, type CommandContext } from '../context.js';
import { loadForCommand } from '../load-config.js';

export async function checkCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  const loaded = await loadForCommand(args.config, ctx, args.verb);
  if (!loaded) return EXIT_CONFIG;
  ctx.stdout(`# ${loaded.path}: valid\n`);
  ctx.stdout(maskedConfigYaml(loaded.config, loaded.secretSources));
  return EXIT_OK;
}
