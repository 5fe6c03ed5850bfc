import { maskedConfigYaml } from '../../config/mask.js';
import { tlsFileProblems } from '../../config/load.js';
import type { ParsedArgs } from '../args.js';
import { EXIT_CONFIG, EXIT_OK, type CommandContext } from '../context.js';
import { redactUrl } from '../../config/redact.js';
import { loadAsService } from './service-proxy.js';

export async function checkCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  // As the service reads it: with the proxy systemd gives it, where this shell's differs.
  const read = await loadAsService(args, ctx);
  if (!read) return EXIT_CONFIG;
  const { loaded, proxy } = read;
  const tls = tlsFileProblems(loaded.config);
  if (tls.length > 0) {
    // The agent would run, its broker connection or webhook port waiting for these files: still an installer's error.
    ctx.stderr(`chair-agent: TLS files cannot be used (TLS_FILES_INVALID) with ${loaded.path}:\n${tls.map((p) => `  ${p}`).join('\n')}\n`);
    return EXIT_CONFIG;
  }
  ctx.stdout(`# ${loaded.path}: valid\n`);
  if (proxy?.own) ctx.stdout(`# as the service reads it: this shell's ${proxy.own.variable} (${redactUrl(proxy.own.url)}) is not in the environment systemd gives the service\n`);
  else if (proxy) ctx.stdout(`# as the service reads it: its proxy is from the environment systemd gives it; this shell has none\n`);
  ctx.stdout(maskedConfigYaml(loaded.config, loaded.secretSources, loaded.proxyVariable));
  return EXIT_OK;
}
