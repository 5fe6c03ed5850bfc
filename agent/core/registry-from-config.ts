import type { Config } from '../config/schema.js';
import { ChairRegistry } from './chair-registry.js';

/** The chair registry with the config's statuses, freshness and expected chairs. */
export function registryFor(config: Config): ChairRegistry {
  return new ChairRegistry({
    timeZone: config.site.timezone,
    availableStatuses: config.vendor.availableStatuses,
    staleAfterMs: 3 * config.vendor.pollSeconds * 1000,
    forgetAfterMs: config.vendor.forgetChairAfterMinutes * 60_000,
    expected: config.gpio.chairs.map((c) => c.deviceId),
  });
}
