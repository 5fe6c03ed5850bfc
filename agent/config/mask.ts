import { stringify } from 'yaml';
import type { Config } from './schema.js';
import { SECRETS, type SecretSource } from './load.js';

export const MASK = '********';

/** A URL with any password replaced; safe to print and log. Unchanged when it holds none. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (!u.password) return url;
    u.password = MASK;
    return u.toString();
  } catch {
    return url;
  }
}

/** Any text with a URL password in it (scheme://user:password@host), the password masked. */
export function redactUrlsIn(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/[^\s/:@]*):[^\s/@]*@/gi, `$1:${MASK}@`);
}

/** The resolved config as YAML, every secret replaced by a mask naming where it came from. */
export function maskedConfigYaml(config: Config, sources: Readonly<Record<string, SecretSource>>): string {
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
  return stringify(copy, { lineWidth: 0 });
}
