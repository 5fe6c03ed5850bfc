import { stringify } from 'yaml';
import type { Config } from './schema.js';
import { SECRETS, type SecretSource } from './load.js';

import { MASK, redactUrl } from './redact.js';

export { MASK, redactUrl, redactUrlsIn } from './redact.js';

/** The resolved config as YAML, every secret replaced by a mask naming where it came from. */
export function maskedConfigYaml(config: Config, sources: Readonly<Record<string, SecretSource>>, proxyVariable?: string): string {
  const copy = JSON.parse(JSON.stringify(config)) as Record<string, Record<string, unknown>>;
  for (const spec of SECRETS) {
    const [section, key] = spec.path;
    const holder = copy[section];
    if (holder && holder[key] !== undefined) {
      const source = sources[`${section}.${key}`];
      holder[key] = source === 'credential' ? `${MASK} (credential ${spec.credential})` : source === 'environment' ? `${MASK} (env ${spec.env})` : MASK;
    }
  }
  if (copy['mqtt'] && typeof copy['mqtt']['url'] === 'string') copy['mqtt']['url'] = redactUrl(copy['mqtt']['url']);
  if (copy['vendor'] && typeof copy['vendor']['baseUrl'] === 'string') copy['vendor']['baseUrl'] = redactUrl(copy['vendor']['baseUrl']);
  if (copy['mqtt'] && typeof copy['mqtt']['proxy'] === 'string') copy['mqtt']['proxy'] = redactUrl(copy['mqtt']['proxy']);
  if (copy['vendor'] && typeof copy['vendor']['proxy'] === 'string') {
    copy['vendor']['proxy'] = `${redactUrl(copy['vendor']['proxy'])}${proxyVariable ? ` (env ${proxyVariable})` : ''}`;
  }
  return stringify(copy, { lineWidth: 0 });
}
