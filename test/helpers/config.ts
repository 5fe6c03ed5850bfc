import { validateConfig } from '../../agent/config/load.js';
import type { Config } from '../../agent/config/schema.js';

export const TEST_API_KEY = 'test-api-key-0123';
export const TEST_SECRET = 'test-channel-secret-4567';

type Sections = Record<string, Record<string, unknown>>;

/** A config validated by the real schema: loopback everything, a free HTTP port. */
export function testConfig(base: { vendorUrl: string; brokerUrl: string; dbPath?: string }, rest: Sections = {}): Config {
  const { vendorUrl, brokerUrl, dbPath } = base;
  const doc: Sections = {
    site: { id: 'test-site' },
    vendor: { baseUrl: vendorUrl, apiKey: TEST_API_KEY, pollSeconds: 0.2, requestTimeoutSeconds: 2, retries: 1 },
    webhook: { channelSecret: TEST_SECRET },
    http: { host: '127.0.0.1', port: 0 },
    mqtt: { url: brokerUrl, reconnectSeconds: 0.2, keepaliveSeconds: 5 },
    storage: { path: dbPath ?? ':memory:' },
    gpio: { driver: 'sim' },
    log: { level: 'silent' },
  };
  for (const [k, v] of Object.entries(rest)) doc[k] = { ...(doc[k] ?? {}), ...v };
  return validateConfig(doc, 'test', { env: {} }).config;
}
