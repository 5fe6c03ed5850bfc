import { within, type Clock, type Timer } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import type { Health } from '../observe/health.js';
import type { ChairRegistry } from '../core/chair-registry.js';
import type { ChairState } from '../core/chair-state.js';
import { errorMessage } from '../platform/errors.js';
import type { Component } from '../platform/component.js';
import type { Broker } from './broker.js';
import type { BrokerSizeLimit } from './size-limit.js';
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
  /** What the broker takes: a bridge/info it would not goes in its short form (shortInfo). */
  sizeLimit?: BrokerSizeLimit;
  /** bridge/info with less detail (the topics held named one, not twenty), for a broker's size limit. */
  shortInfo?: (info: Record<string, unknown>) => Record<string, unknown>;
  infoIntervalMs: number;
  /** Where the chairs with retained topics are remembered, so a chair gone while the agent was down is cleared too. */
  store?: ChairTopicStore;
  /** The outbox: bridge/info carries the backlog, so it is refreshed when the backlog moves (coalesced). */
  backlog?: BacklogEvents;
}

/** The outbox's events that move the backlog. */
export interface BacklogEvents {
  on(event: 'inserted' | 'delivered', listener: () => void): unknown;
  off(event: 'inserted' | 'delivered', listener: () => void): unknown;
}

export interface ChairTopicStore {
  get(key: string): string | undefined;
  set(key: string, value: string): Promise<void>;
}

/** The chairs whose state and availability this agent has retained on the broker. */
export const RETAINED_CHAIRS_KEY = 'mqtt.retainedChairs';

/**
 * A gone chair's retained topics are cleared this long after it is found gone. Its Home Assistant
 * entities are removed first (at once): an empty message on a topic an entity still reads is a
 * template error in Home Assistant's log, and Home Assistant removes an entity in a task of its
 * own, after the messages that came with the removal.
 */
export const CLEAR_GONE_AFTER_MS = 5_000;

/**
 * Publishes the site's picture to the broker: bridge state (and its will), bridge info, each
 * chair's retained state on change and its availability; everything retained again after each
 * reconnect. Owns the broker connection: connects on start, says offline and disconnects on stop.
 */
export class MqttBridge implements Component {
  readonly name = 'mqtt-bridge';
  private infoTimer: Timer | null = null;
  private infoPending: Timer | null = null;
  /** Chairs with retained topics on the broker (persisted); cleared when the registry forgets them. */
  private retained = new Set<string>();
  /** The retained chairs were checked against a successful list (afterwards the registry says who leaves). */
  private swept = false;
  private clearTimer: Timer | null = null;

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
    this.remember(state.deviceId);
    this.send(this.deps.topics.chair(state.deviceId), JSON.stringify(state));
  };

  private readonly onAvailability = (deviceId: string, online: boolean): void => {
    this.remember(deviceId);
    this.send(this.deps.topics.availability(deviceId), online ? ONLINE : OFFLINE);
    this.deps.logger.info({ deviceId, online }, 'chair availability changed');
  };

  private readonly onHealth = (): void => this.infoSoon();
  private readonly onBacklog = (): void => this.infoSoon();

  /** A chair is gone: empty retained messages delete its state, availability and day from the broker. */
  private readonly onRemoved = (deviceId: string): void => {
    this.deps.logger.info({ deviceId }, 'chair left the vendor list; clearing its retained topics');
    this.clearGoneSoon();
  };

  /**
   * After a successful list every chair the registry does not know is gone; its retained topics
   * are cleared while connected (else at the next connect). Before the first list nothing is
   * cleared: the vendor may still list it.
   */
  private readonly onListed = (): void => {
    if (!this.swept) this.clearGoneSoon();
  };

  start(): void {
    const { broker, registry, health } = this.deps;
    broker.on('connect', this.onConnect);
    broker.on('close', this.onClose);
    registry.on('state', this.onState);
    registry.on('availability', this.onAvailability);
    registry.on('removed', this.onRemoved);
    registry.on('listed', this.onListed);
    this.retained = new Set(this.loadRetained());
    health.on('change', this.onHealth);
    health.on('synced', this.onHealth);
    this.deps.backlog?.on('inserted', this.onBacklog);
    this.deps.backlog?.on('delivered', this.onBacklog);
    this.infoTimer = this.deps.clock.setInterval(() => this.publishInfo(), this.deps.infoIntervalMs);
    broker.connect();
    // Nothing can be tried yet: /healthz and the status page say why rather than "not connected yet".
    if (broker.problem) health.set('broker', false, broker.problem);
  }

  async stop(): Promise<void> {
    const { broker, registry, health } = this.deps;
    this.infoTimer?.cancel();
    this.infoPending?.cancel();
    this.clearTimer?.cancel();
    this.clearTimer = null;
    registry.off('state', this.onState);
    registry.off('availability', this.onAvailability);
    registry.off('removed', this.onRemoved);
    registry.off('listed', this.onListed);
    if (this.savePending) this.saveRetained();
    health.off('change', this.onHealth);
    health.off('synced', this.onHealth);
    this.deps.backlog?.off('inserted', this.onBacklog);
    this.deps.backlog?.off('delivered', this.onBacklog);
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

  /**
   * bridge/info, or its short form where the broker does not take it whole (Mosquitto's
   * message_size_limit): each topic the broker refuses adds itself to the list of held topics, so
   * without it the very report that says what the broker refuses would be refused in its turn.
   */
  publishInfo(): void {
    const { topics, sizeLimit, shortInfo } = this.deps;
    const info = this.deps.info();
    if (!sizeLimit || !shortInfo) return this.send(topics.bridgeInfo, JSON.stringify(info));
    if (!this.deps.broker.connected) return;
    sizeLimit.publishRetained(topics.bridgeInfo, JSON.stringify(info), () => JSON.stringify(shortInfo(info)), (err) =>
      this.deps.logger.debug({ topic: topics.bridgeInfo, err: errorMessage(err) }, 'retained publish not acknowledged; will republish on reconnect'),
    );
  }

  private async republishAll(): Promise<void> {
    const { topics, registry } = this.deps;
    this.send(topics.bridgeState, ONLINE);
    this.publishInfo();
    for (const view of registry.views()) {
      this.remember(view.deviceId);
      if (view.state) this.send(topics.chair(view.deviceId), JSON.stringify(view.state));
      this.send(topics.availability(view.deviceId), view.online ? ONLINE : OFFLINE);
    }
    this.clearGoneSoon();
  }

  private loadRetained(): string[] {
    try {
      const stored = this.deps.store?.get(RETAINED_CHAIRS_KEY);
      const ids: unknown = stored ? JSON.parse(stored) : [];
      return Array.isArray(ids) ? ids.filter((id): id is string => typeof id === 'string') : [];
    } catch {
      return [];
    }
  }

  private clearGoneSoon(): void {
    this.clearTimer ??= this.deps.clock.setTimeout(() => {
      this.clearTimer = null;
      this.clearGone();
    }, CLEAR_GONE_AFTER_MS);
  }

  /**
   * Clears the retained topics of chairs the registry does not know now (one back meanwhile is
   * kept), once a list says what exists.
   */
  private clearGone(): void {
    const { broker, registry, topics } = this.deps;
    if (!broker.connected || registry.lastSuccess() === null) return;
    this.swept = true;
    const known = new Set(registry.knownIds());
    let changed = false;
    for (const id of this.retained) {
      if (known.has(id)) continue;
      this.send(topics.chair(id), '');
      this.send(topics.availability(id), '');
      this.send(topics.chairToday(id), '');
      this.retained.delete(id);
      changed = true;
    }
    if (changed) this.saveRetained();
  }

  private remember(deviceId: string): void {
    if (this.retained.has(deviceId)) return;
    this.retained.add(deviceId);
    // A first list of a thousand chairs is one write, not a thousand.
    this.savePending ??= setImmediate(() => this.saveRetained());
  }

  private savePending: NodeJS.Immediate | null = null;

  private saveRetained(): void {
    if (this.savePending) clearImmediate(this.savePending);
    this.savePending = null;
    this.deps.store
      ?.set(RETAINED_CHAIRS_KEY, JSON.stringify([...this.retained].sort()))
      .catch((err: unknown) => this.deps.logger.warn({ err: errorMessage(err) }, 'cannot store the chairs with retained topics'));
  }

  /** Retained, QoS 1. While disconnected nothing is sent: the reconnect republishes everything. */
  private send(topic: string, payload: string): void {
    if (!this.deps.broker.connected) return;
    this.deps.broker.publish(topic, payload, { qos: 1, retain: true }).catch((err: unknown) => {
      this.deps.logger.debug({ topic, err: errorMessage(err) }, 'retained publish not acknowledged; will republish on reconnect');
    });
  }
}
