import { AgentError } from '../platform/errors.js';

export const DEFAULT_CONFIG_PATH = '/etc/chair-agent/config.yaml';

export type ConfigErrorCode = 'CONFIG_UNREADABLE' | 'CONFIG_PERMISSION' | 'CONFIG_SYNTAX' | 'CONFIG_INVALID';

/** Exit 78. `problems` are the "path: what is wrong" lines, every one of them. */
export class ConfigError extends AgentError {
  declare readonly code: ConfigErrorCode;
  constructor(
    code: ConfigErrorCode,
    readonly problems: readonly string[],
  ) {
    super(code, problems.join('\n'));
    this.name = 'ConfigError';
  }
}
