import { ConfigError, DEFAULT_CONFIG_PATH, loadConfig, type LoadedConfig } from '../config/load.js';
import type { CommandContext } from './context.js';

export function configPath(explicit: string | undefined, env: CommandContext['env']): string {
  return explicit ?? env['CHAIR_AGENT_CONFIG'] ?? DEFAULT_CONFIG_PATH;
}

/** Loads the config for a command; on failure prints every problem and returns null (exit 78). */
export function loadForCommand(explicit: string | undefined, ctx: CommandContext): LoadedConfig | null {
  const path = configPath(explicit, ctx.env);
  try {
    return loadConfig(path, { env: ctx.env, credentialsDirectory: ctx.env['CREDENTIALS_DIRECTORY'] });
  } catch (err) {
    if (err instanceof ConfigError) {
      ctx.stderr(`chair-agent: configuration error (${err.code}) in ${path}:\n${err.problems.map((p) => `  ${p}`).join('\n')}\n`);
      return null;
    }
    throw err;
  }
}
