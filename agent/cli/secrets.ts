import type { Config } from '../config/schema.js';
import { decodeUserinfo } from '../platform/url-credentials.js';

/** The secret values of a config, for the logger's last-line scrubber. */
export function secretValues(config: Config): string[] {
  const out = [config.vendor.apiKey];
  if (config.webhook.channelSecret) out.push(config.webhook.channelSecret);
  if (config.mqtt.password) out.push(config.mqtt.password);
  if (config.http.adminToken) out.push(config.http.adminToken);
  for (const url of [config.mqtt.url, config.vendor.baseUrl, ...[config.vendor.proxy, config.mqtt.proxy].filter((u) => u !== undefined)]) {
    try {
      const p = new URL(url).password;
      if (p) out.push(p, decodeUserinfo(p));
    } catch {
      // validated already
    }
  }
  return out;
}
