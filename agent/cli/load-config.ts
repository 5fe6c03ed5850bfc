import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ConfigError, DEFAULT_CONFIG_PATH } from '../config/config-error.js';
import { loadConfigDetached } from '../config/load-detached.js';
import type { LoadedConfig } from '../config/load.js';
import type { CommandContext } from './context.js';

export function configPath(explicit: string | undefined, env: CommandContext['env']): string {
  return explicit ?? env['CHAIR_AGENT_CONFIG'] ?? DEFAULT_CONFIG_PATH;
}

/**
 * Where the stored secrets are: systemd's $CREDENTIALS_DIRECTORY in the service, else the
 * credentials/ directory beside the config (/etc/chair-agent/credentials), which is what the
 * unit hands the service, so `sudo chair-agent check` sees the secrets the service sees.
 */
export function credentialsDirectory(path: string, env: CommandContext['env']): string | undefined {
  const fromSystemd = env['CREDENTIALS_DIRECTORY'];
  if (fromSystemd) return fromSystemd;
  const beside = join(dirname(path), 'credentials');
  return existsSync(beside) ? beside : undefined;
}

/**
 * Loads the config for a command; on failure prints every problem and returns null (exit 78).
 * A file or secret this user may not read is one line naming sudo. `detached`: validated on a
 * short-lived worker thread, so the parser and schema never stay in a long-running process.
 */
export async function loadForCommand(explicit: string | undefined, ctx: CommandContext, verb?: string, detached = false): Promise<LoadedConfig | null> {
  const path = configPath(explicit, ctx.env);
  const sources = { env: ctx.env, credentialsDirectory: credentialsDirectory(path, ctx.env) };
  try {
    return detached ? await loadConfigDetached(path, sources) : (await import('../config/load.js')).loadConfig(path, sources);
  } catch (err) {
    if (err instanceof ConfigError && err.code === 'CONFIG_PERMISSION') {
      const again = ['sudo', 'chair-agent', ...(verb ? [verb] : []), ...(explicit ? ['--config', explicit] : [])].join(' ');
      ctx.stderr(`chair-agent: ${err.problems[0]}; run it as root: ${again}\n`);
      return null;
    }
    if (err instanceof ConfigError) {
      ctx.stderr(`chair-agent: configuration error (${err.code}) in ${path}:\n${err.problems.map((p) => `  ${p}`).join('\n')}\n`);
      return null;
    }
    throw err;
  }
}
