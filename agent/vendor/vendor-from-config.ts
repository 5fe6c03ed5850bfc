import type { Clock } from '../platform/clock.js';
import type { Config } from '../config/schema.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../observe/metrics.js';
import { contextTrusting, readCaBundle } from '../platform/tls-files.js';
import { errorCode, errorMessage } from '../platform/errors.js';
import type { SecureContext } from 'node:tls';
import { UndiciVendorApi } from './undici-vendor-api.js';
import type { VendorApi } from './vendor-api.js';

/** The vendor client the config describes (the agent, doctor and `chair-agent start` use it). */
export function vendorFromConfig(config: Config, clock: Clock, logger: Logger, metrics?: Metrics): VendorApi {
  const log = logger.child({ component: 'vendor' });
  return new UndiciVendorApi({
    trust: vendorTrust(config.vendor.ca, log),
    baseUrl: config.vendor.baseUrl,
    apiKey: config.vendor.apiKey,
    timeoutMs: config.vendor.requestTimeoutSeconds * 1000,
    retries: config.vendor.retries,
    proxy: config.vendor.proxy,
    clock,
    logger: log,
    observe: metrics
      ? (endpoint, outcome, seconds) => {
          metrics.vendorRequests.inc({ endpoint, outcome });
          metrics.vendorDuration.observe({ endpoint }, seconds);
        }
      : undefined,
  });
}

/**
 * vendor.ca as a TLS context that trusts it besides the usual CAs. A file that cannot be used
 * (`check` refuses it; a restore may still leave it root's own) must not stop the buttons and the
 * outbox: it is said, and the vendor is tried with the usual CAs, which an inspecting proxy fails.
 */
function vendorTrust(path: string | undefined, logger: Logger): { secureContext: SecureContext; file: string } | undefined {
  if (path === undefined) return undefined;
  try {
    return { secureContext: contextTrusting(readCaBundle(path, 'vendor.ca'), logger), file: path };
  } catch (err) {
    logger.error({ code: errorCode(err) ?? 'TLS_FILES_INVALID', err: errorMessage(err) }, 'vendor.ca cannot be used: the vendor is reached with the usual CAs only');
    return undefined;
  }
}
