import type { Clock } from '../platform/clock.js';
import type { Config } from '../config/schema.js';
import type { ChairRegistry } from '../core/chair-registry.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../observe/metrics.js';
import type { VendorApi } from '../vendor/vendor-api.js';
import { StartService } from './start-service.js';

/** Minutes of a start that names none: the chair's own, else vendor.sessionMinutes. */
export function minutesFor(config: Config): (deviceId: string) => number {
  return (id) => config.gpio.chairs.find((c) => c.deviceId === id)?.minutes ?? config.vendor.sessionMinutes;
}

/** The start service with the config's rules (the agent and `chair-agent start`). */
export function startServiceFor(config: Config, deps: { vendor: VendorApi; registry: ChairRegistry; clock: Clock; logger: Logger; metrics?: Metrics }): StartService {
  return new StartService({
    ...deps,
    logger: deps.logger.child({ component: 'starts' }),
    minutesFor: minutesFor(config),
    confirmTimeoutMs: config.start.confirmTimeoutSeconds * 1000,
    confirmIntervalMs: config.start.confirmIntervalSeconds * 1000,
    unknownHoldMs: config.start.unknownHoldSeconds * 1000,
  });
}
