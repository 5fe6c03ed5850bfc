import type { Clock } from '../platform/clock.js';
import type { Config } from '../config/schema.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../observe/metrics.js';
import { UndiciVendorApi } from './undici-vendor-api.js';
import type { VendorApi } from './vendor-api.js';

/** The vendor client the config describes (the agent, doctor and `chair-agent start` use it). */
export function vendorFromConfig(config: Config, clock: Clock, logger: Logger, metrics?: Metrics): VendorApi {
  return new UndiciVendorApi({
    baseUrl: config.vendor.baseUrl,
    apiKey: config.vendor.apiKey,
    timeoutMs: config.vendor.requestTimeoutSeconds * 1000,
    retries: config.vendor.retries,
    proxy: config.vendor.proxy,
    clock,
    logger: logger.child({ component: 'vendor' }),
    observe: metrics
      ? (endpoint, outcome, seconds) => {
          metrics.vendorRequests.inc({ endpoint, outcome });
          metrics.vendorDuration.observe({ endpoint }, seconds);
        }
      : undefined,
  });
}
