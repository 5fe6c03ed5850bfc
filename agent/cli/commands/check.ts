import { maskedConfigYaml } from '../../config/mask.js';
import { tlsFileProblems } from '../../config/load.js';
import type { ParsedArgs } from '../args.js';
import { EXIT_CONFIG, EXIT_OK, type CommandContext } from '../context.js';
import { loadForCommand } from '../load-config.js';

export async function checkCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  const loaded = await loadForCommand(args.config, ctx, args.verb);
  if (!loaded) return EXIT_CONFIG;
  const tls = tlsFileProblems(loaded.config);
  if (tls.length > 0) {
    // The agent would run, its broker connection or webhook port waiting for these files: still an installer's error.
    ctx.stderr(`chair-agent: TLS files cannot be used (TLS_FILES_INVALID) with ${loaded.path}:\n${tls.map((p) => `  ${p}`).join('\n')}\n`);
    return EXIT_CONFIG;
  }
  ctx.stdout(`# ${loaded.path}: valid\n`);
  ctx.stdout(maskedConfigYaml(loaded.config, loaded.secretSources, loaded.proxyVariable));
  return EXIT_OK;
}
