import type { Clock } from '../platform/clock.js';
import type { Config } from '../config/schema.js';
import type { Logger } from '../platform/logger.js';
import type { Bias } from './gpiod-binding.js';
import type { GpioDriver } from './gpio-driver.js';
import { GpiodDriver } from './gpiod-driver.js';
import { OnoffDriver } from './onoff-driver.js';
import { SimGpioDriver } from './sim-driver.js';
import type { ButtonSpec } from './buttons.js';
import type { LedSpec } from './leds.js';
import { STATUS_LED, chairLedName } from './indicators.js';

/** The buttons' pull resistor: gpio.bias, else pull-up for buttons to ground (activeLow), pull-down otherwise. */
export function buttonBias(config: Config): Bias {
  return config.gpio.bias ?? (config.gpio.activeLow ? 'pull-up' : 'pull-down');
}

/** The GPIO driver gpio.driver names (the agent and `chair-agent gpio`). */
export function gpioFromConfig(config: Config, clock: Clock, logger: Logger): GpioDriver {
  const log = logger.child({ component: 'gpio' });
  switch (config.gpio.driver) {
    case 'sim':
      return new SimGpioDriver(clock);
    case 'onoff':
      return new OnoffDriver({ logger: log, chipBase: config.gpio.chipBase });
    case 'gpiod':
      return new GpiodDriver({ logger: log, bias: buttonBias(config) });
  }
}

/** The LEDs gpio names: the status LED and each chair's. */
export function ledSpecs(config: Config): LedSpec[] {
  return [
    ...(config.gpio.statusLed === undefined ? [] : [{ name: STATUS_LED, pin: config.gpio.statusLed }]),
    ...config.gpio.chairs.flatMap((c) => (c.led === undefined ? [] : [{ name: chairLedName(c.deviceId), pin: c.led }])),
  ];
}

/** The staff buttons gpio names, one per chair at most. */
export function buttonSpecs(config: Config): ButtonSpec[] {
  return config.gpio.chairs.flatMap((c) => (c.button === undefined ? [] : [{ deviceId: c.deviceId, pin: c.button }]));
}
