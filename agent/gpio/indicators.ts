import type { Health } from '../observe/health.js';
import type { ChairRegistry } from '../core/chair-registry.js';
import { chairLedPattern, statusLedPattern } from '../core/led-patterns.js';
import type { StartOutcome, StartService } from '../start/start-service.js';
import type { Component } from '../platform/component.js';
import type { LedController } from './leds.js';

export const chairLedName = (deviceId: string): string => `chair:${deviceId}`;
export const STATUS_LED = 'status';

/** Keeps every LED's pattern in step with the chairs, the starts and the agent's health. */
export class Indicators implements Component {
  readonly name = 'indicators';

  constructor(private readonly deps: { leds: LedController; registry: ChairRegistry; starts: StartService; health: Health; chairs: readonly string[] }) {}

  private readonly update = (deviceId: string): void => {
    const view = this.deps.registry.view(deviceId);
    this.deps.leds.set(
      chairLedName(deviceId),
      chairLedPattern(
        view && {
          online: view.online,
          running: view.state?.running ?? false,
          startable: view.state?.startable ?? false,
          starting: this.deps.starts.isStarting(deviceId),
        },
      ),
    );
  };

  private readonly onState = (s: { deviceId: string }): void => this.update(s.deviceId);
  private readonly onFinished = (o: StartOutcome): void => {
    this.update(o.deviceId);
    if (!o.ok) this.deps.leds.flash(chairLedName(o.deviceId));
  };
  private readonly onHealth = (): void => this.updateStatus();

  private updateStatus(): void {
    const { health } = this.deps;
    this.deps.leds.set(STATUS_LED, statusLedPattern(health.get('vendor').ok, health.get('broker').ok, health.get('gpio').ok));
  }

  /** Sets every LED to what it should show now (after something else drove them, e.g. an LED walk). */
  refresh(): void {
    for (const id of this.deps.chairs) this.update(id);
    this.updateStatus();
  }

  start(): void {
    const { registry, starts, health } = this.deps;
    registry.on('state', this.onState);
    registry.on('availability', this.update);
    starts.on('starting', this.update);
    starts.on('finished', this.onFinished);
    health.on('change', this.onHealth);
    for (const id of this.deps.chairs) this.update(id);
    this.updateStatus();
  }

  stop(): void {
    const { registry, starts, health } = this.deps;
    registry.off('state', this.onState);
    registry.off('availability', this.update);
    starts.off('starting', this.update);
    starts.off('finished', this.onFinished);
    health.off('change', this.onHealth);
  }
}
