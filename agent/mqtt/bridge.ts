import { within, type Clock, type Timer } from '../clock.js';
import type { Logger } from '../logger.js';
import type { Health } from '../health.js';
import type { ChairRegistry } from '../core/chair-registry.js';
import type { ChairState } from '../core/chair-state.js';
import { errorMessage } from '../errors.js';
import type { Component } from '../components/component.js';
import type { Broker } from './broker.js';
import { OFFLINE, ONLINE, type Topics } from './topics.js';

export interface BridgeDeps {
  broker: Broker;
  topics: Topics;
  registry: ChairRegistry;
  health: Health;
  clock: Clock;
  logger: Logger;
  /** The bridge/info payload, built fresh each time it is published. */
  info: () => Record<string, unknown>;
  infoIntervalMs: number;
}

/**
 * Publishes the site's picture to the broker: bridge state (and its will), bridge info, each
 * chair's retained state on change and its availability; everything retained again after each
 * reconnect. Owns the broker connection: connects on start, says offline and disconnects on stop.
 */
export class MqttBridge implements Component {
  readonly name = 'mqtt-bridge';
  private infoTimer: Timer | null = null;
  private infoPending: Timer | null = null;

  constructor(private readonly deps: BridgeDeps) {}

  private readonly onConnect = (): void => {
    this.deps.health.set('broker', true, `connected to ${this.deps.broker.description}`);
    void this.republishAll();
  };

  private readonly onClose = (): void => {
    if (this.deps.health.set('broker', false, `disconnected from ${this.deps.broker.description}`)) {
      this.deps.logger.warn({ broker: this.deps.broker.description }, 'broker connection lost; buffering');
    }
  };

  private readonly onState = (state: ChairState): void => {
    this.send(this.deps.topics.chair(state.deviceId), JSON.stringify(state));
  };

  private readonly onAvailability = (deviceId: string, online: boolean): void => {
    this.send(this.deps.topics.availability(deviceId), online ? ONLINE : OFFLINE);
    this.deps.logger.info({ deviceId, online }, 'chair availability changed');
  };

  private readonly onHealth = (): void => this.infoSoon();

  start(): void {
    const { broker, registry, health } = this.deps;
    broker.on('connect', this.onConnect);
    broker.on('close', this.onClose);
    registry.on('state', this.onState);
    registry.on('availability', this.onAvailability);
    health.on('change', this.onHealth);
    health.on('synced', this.onHealth);
    this.infoTimer = this.deps.clock.setInterval(() => this.publishInfo(), this.deps.infoIntervalMs);
    broker.connect();
  }

  async stop(): Promise<void> {
    const { broker, registry, health } = this.deps;
    this.infoTimer?.cancel();
    this.infoPending?.cancel();
    registry.off('state', this.onState);
    registry.off('availability', this.onAvailability);
    health.off('change', this.onHealth);
    health.off('synced', this.onHealth);
    broker.off('connect', this.onConnect);
    broker.off('close', this.onClose);
    if (broker.connected) {
      // A clean disconnect does not fire the will, so say offline ourselves, and wait for the ack.
      const published = broker.publish(this.deps.topics.bridgeState, OFFLINE, { qos: 1, retain: true });
      published.catch((err: unknown) => this.deps.logger.warn({ err: errorMessage(err) }, 'could not publish the offline state'));
      if (!(await within(this.deps.clock, published, 1_500))) this.deps.logger.warn('the broker did not acknowledge the offline state in time');
    }
    await broker.end(1_000);
  }

  /** Publishes bridge/info soon, coalescing a burst of changes into one message a second at most. */
  infoSoon(): void {
    if (this.infoPending) return;
    this.infoPending = this.deps.clock.setTimeout(() => {
      this.infoPending = null;
      this.publishInfo();
    }, 1_000);
  }

  publishInfo(): void {
    this.send(this.deps.topics.bridgeInfo, JSON.stringify(this.deps.info()));
  }

  private async republishAll(): Promise<void> {
    const { topics, registry } = this.deps;
    this.send(topics.bridgeState, ONLINE);
    this.publishInfo();
    for (const view of registry.views()) {
      if (view.state) this.send(topics.chair(view.deviceId), JSON.stringify(view.state));
      this.send(topics.availability(view.deviceId), view.online ? ONLINE : OFFLINE);
    }
  }

  /** Retained, QoS 1. While disconnected nothing is sent: the reconnect republishes everything. */
  private send(topic: string, payload: string): void {
    if (!this.deps.broker.connected) return;
    this.deps.broker.publish(topic, payload, { qos: 1, retain: true }).catch((err: unknown) => {
      this.deps.logger.debug({ topic, err: errorMessage(err) }, 'retained publish not acknowledged; will republish on reconnect');
    });
  }
}
