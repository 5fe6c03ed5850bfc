import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../observe/metrics.js';
import { errorMessage } from '../platform/errors.js';
import type { GpioDriver, GpioInput, InputOptions } from './gpio-driver.js';
import type { StartService } from '../start/start-service.js';
import type { Component } from '../platform/component.js';

export interface ButtonSpec {
  deviceId: string;
  pin: number;
}

/** Staff buttons: a debounced press starts its chair; a press while a start is under way is ignored. */
export class Buttons implements Component {
  readonly name = 'buttons';
  private readonly inputs: GpioInput[] = [];
  private readonly failures: string[] = [];

  constructor(
    private readonly deps: {
      driver: GpioDriver;
      ready: () => boolean;
      specs: readonly ButtonSpec[];
      input: InputOptions;
      starts: StartService;
      logger: Logger;
      metrics: Metrics;
      /** A button line stopped working after it was opened (health, the status LED). */
      onFailure?: () => void;
    },
  ) {}

  start(): void {
    if (!this.deps.ready()) return;
    for (const spec of this.deps.specs) {
      try {
        const input = { ...this.deps.input, onFailure: (err: Error) => this.lineFailed(spec.deviceId, err) };
        this.inputs.push(this.deps.driver.openInput(spec.pin, input, () => this.pressed(spec.deviceId)));
      } catch (err) {
        this.failures.push(`button of ${spec.deviceId}: ${errorMessage(err)}`);
        this.deps.logger.error({ deviceId: spec.deviceId, pin: spec.pin, err: errorMessage(err) }, 'cannot open button line');
      }
    }
  }

  stop(): void {
    for (const input of this.inputs.splice(0)) input.close();
  }

  private lineFailed(deviceId: string, err: Error): void {
    this.failures.push(`button of ${deviceId}: ${errorMessage(err)}`);
    this.deps.onFailure?.();
  }

  /** Why each button that could not be opened, or stopped working, failed. */
  failed(): string[] {
    return [...this.failures];
  }

  pressed(deviceId: string): void {
    this.deps.metrics.buttonPresses.inc({ device_id: deviceId });
    if (this.deps.starts.isStarting(deviceId)) {
      this.deps.logger.info({ deviceId }, 'button press ignored: a start of this chair is under way');
      return;
    }
    this.deps.logger.info({ deviceId }, 'button pressed');
    void this.deps.starts.startChair(deviceId, { source: 'button' });
  }
}
