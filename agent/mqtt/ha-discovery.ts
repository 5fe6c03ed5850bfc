import { createHash } from 'node:crypto';
import type { Component } from '../platform/component.js';
import type { Clock, Timer } from '../platform/clock.js';
import type { ChairRegistry } from '../core/chair-registry.js';
import { errorMessage } from '../platform/errors.js';
import type { Logger } from '../platform/logger.js';
import type { Broker, InboundMessage } from './broker.js';
import type { Topics } from './topics.js';
import { abbreviated } from './ha-abbreviate.js';
import type { BrokerSizeLimit } from './size-limit.js';

/** Where the agent keeps the object ids it announced, so a chair that is gone can be cleared after a restart. */
export const ANNOUNCED_KEY = 'homeassistant.announced';

export interface DiscoveryStore {
  get(key: string): string | undefined;
  set(key: string, value: string): Promise<void>;
}

/**
 * Home Assistant sends its birth message once each time it connects. A client that repeats it
 * (in a loop, or HA itself reconnecting again and again) gets one announcement now and at most
 * one per this long after: each is every config of every chair, some dozens of retained messages.
 */
export const BIRTH_INTERVAL_MS = 10_000;

export interface HaDiscoveryDeps {
  broker: Broker;
  /** What the broker takes: a config it would not is sent in Home Assistant's short form. */
  sizeLimit: BrokerSizeLimit;
  clock: Clock;
  topics: Topics;
  registry: ChairRegistry;
  store: DiscoveryStore;
  logger: Logger;
  prefix: string;
  siteId: string;
  version: string;
  /** Where a site's Home Assistant users find help (origin.support_url), when the chain has one. */
  supportUrl?: string | undefined;
  /** The chairs of the config: always announced, even before the vendor lists them. */
  configured: readonly string[];
  /** The webhook port serves HTTPS (webhook.cert): the site box shows when its certificate expires. */
  webhookHttps?: boolean;
  /** site.currency: the takings are money in it. */
  currency?: string | undefined;
}

interface Entity {
  component: 'sensor' | 'binary_sensor' | 'button';
  objectId: string;
  config: Record<string, unknown>;
}

/** An id Home Assistant accepts in a topic and as a unique id: [a-zA-Z0-9_-], stable for a DeviceId. */
export function haId(deviceId: string): string {
  const slug = deviceId.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 48);
  return slug === deviceId ? slug : `${slug}_${createHash('sha256').update(deviceId, 'utf8').digest('hex').slice(0, 8)}`;
}

const ONLINE_TEMPLATE = '{{ value_json.state }}';

/**
 * Available while the agent is online (bridge/state). Its template gives "online" or "offline",
 * Home Assistant's default payload_available and payload_not_available, which are therefore left
 * out (as Zigbee2MQTT leaves them out): each config is smaller under a broker's size limit.
 */
const AGENT_UP = (t: Topics): Record<string, string> => ({ availability_topic: t.bridgeState, availability_template: ONLINE_TEMPLATE });

/**
 * The entity id Home Assistant should give an entity on first sight (default_entity_id, which
 * replaced object_id in 2025.10): <component>.<object id>, as Home Assistant's VALID_ENTITY_ID
 * allows it: lower case [a-z0-9_], no "__" and no "_" at either end. A site id such as "mall--01"
 * or a DeviceId with odd characters would otherwise give one it does not accept.
 */
function defaultEntityId(component: Entity['component'], id: string): string {
  const objectId = id
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, '_')
    .replace(/_{2,}/g, '_')
    .replace(/^_|_$/g, '');
  return `${component}.${objectId}`;
}

/**
 * Home Assistant MQTT discovery: one HA device per chair (status, remaining time, running,
 * seated, a Start button that publishes the normal start command, and today's uses, minutes and
 * takings), linked to one device for the site box (backlog, vendor reachable, broker, last sync,
 * and the site's uses, minutes and takings today). A chair's live entities are available only
 * while both the agent (bridge/state) and the chair (its availability topic) are online.
 * Configs are retained and announced again on every connect and whenever Home Assistant's birth
 * message ("online" on <prefix>/status) arrives, at most once per BIRTH_INTERVAL_MS. Unique ids
 * derive from the site id and DeviceId, so they survive restarts; a chair the registry forgets
 * (not configured, and missing from the vendor's list for vendor.forgetChairAfterMinutes) has its
 * configs cleared (empty retained messages), also after a restart, since what was announced is
 * stored; it is announced again if it returns. A config the broker does not take as it reads (a
 * small message_size_limit) goes in Home Assistant's short form (ha-abbreviate.ts).
 */
export class HaDiscovery implements Component {
  readonly name = 'homeassistant';
  private announced = new Set<string>();
  private listed = false;
  /** Whether the log said once that configs go in the short form. */
  private saidShort = false;

  constructor(private readonly deps: HaDiscoveryDeps) {}

  private get statusTopic(): string {
    return `${this.deps.prefix}/status`;
  }

  private readonly onConnect = (): void => {
    this.deps.broker.subscribe(this.statusTopic).catch((err: unknown) => this.deps.logger.warn({ err: errorMessage(err) }, 'cannot subscribe to Home Assistant status'));
    this.announce();
  };

  private readonly onMessage = (msg: InboundMessage): void => {
    if (msg.topic !== this.statusTopic || msg.payload.toString('utf8').trim() !== 'online') return;
    if (this.birthTimer) return;
    const wait = this.lastBirth + BIRTH_INTERVAL_MS - this.deps.clock.monotonic();
    if (wait <= 0) return this.announceForBirth();
    this.birthTimer = this.deps.clock.setTimeout(() => {
      this.birthTimer = null;
      this.announceForBirth();
    }, wait);
  };

  private lastBirth = -Infinity;
  /** The announcement due for a birth message that came within BIRTH_INTERVAL_MS of the last. */
  private birthTimer: Timer | null = null;

  private announceForBirth(): void {
    this.lastBirth = this.deps.clock.monotonic();
    this.announceSoon();
  }

  /** A chair seen for the first time, or the first chair list: announce (and clear what is gone). */
  private readonly onChair = (deviceId: string): void => {
    const first = !this.listed && this.deps.registry.lastSuccess() !== null;
    if (first) this.listed = true;
    if (first || !this.announced.has(`chair:${deviceId}`)) this.announceSoon();
  };

  /** Coalesced: a chair list that brings many new chairs is announced once, after it is applied. */
  private announceSoon(): void {
    this.pending ??= setImmediate(() => {
      this.pending = null;
      this.announce();
    });
  }

  private pending: NodeJS.Immediate | null = null;

  private readonly onState = (state: { deviceId: string }): void => this.onChair(state.deviceId);
  private readonly onAvailability = (deviceId: string): void => this.onChair(deviceId);
  /** A chair the vendor no longer lists (after the grace period): its entities are cleared. */
  private readonly onRemoved = (): void => this.announceSoon();

  start(): void {
    try {
      const stored = this.deps.store.get(ANNOUNCED_KEY);
      if (stored) this.announced = new Set(JSON.parse(stored) as string[]);
    } catch {
      this.announced = new Set();
    }
    this.deps.broker.on('connect', this.onConnect);
    this.deps.broker.on('message', this.onMessage);
    this.deps.registry.on('state', this.onState);
    this.deps.registry.on('availability', this.onAvailability);
    this.deps.registry.on('removed', this.onRemoved);
    if (this.deps.broker.connected) this.onConnect();
  }

  async stop(): Promise<void> {
    if (this.pending) clearImmediate(this.pending);
    this.pending = null;
    this.birthTimer?.cancel();
    this.birthTimer = null;
    this.deps.broker.off('connect', this.onConnect);
    this.deps.broker.off('message', this.onMessage);
    this.deps.registry.off('state', this.onState);
    this.deps.registry.off('availability', this.onAvailability);
    this.deps.registry.off('removed', this.onRemoved);
    await this.deps.broker.unsubscribe(this.statusTopic).catch(() => undefined);
  }

  /** The chairs to have in Home Assistant now. */
  private chairs(): string[] {
    return [...new Set([...this.deps.configured, ...this.deps.registry.knownIds()])];
  }

  private topic(e: Entity, node: string): string {
    return `${this.deps.prefix}/${e.component}/${node}/${e.objectId}/config`;
  }

  announce(): void {
    if (!this.deps.broker.connected) return;
    const site = `chair_agent_${haId(this.deps.siteId)}`;
    const publish = (topic: string, payload: string): void =>
      void this.deps.broker.publish(topic, payload, { qos: 1, retain: true }).catch((err: unknown) => this.deps.logger.debug({ topic, err: errorMessage(err) }, 'discovery publish not acknowledged'));
    for (const e of this.siteEntities(site)) this.publishConfig(this.topic(e, site), e.config);
    // Cleared when the site serves no HTTPS (any more): an empty retained config removes the entity.
    if (!this.deps.webhookHttps) publish(this.topic(this.certificateEntity(site), site), '');
    const current = new Set<string>();
    for (const id of this.chairs()) {
      current.add(`chair:${id}`);
      const node = `${site}_${haId(id)}`;
      for (const e of this.chairEntities(site, id)) this.publishConfig(this.topic(e, node), e.config);
    }
    // Clear the chairs that are gone, once the vendor's list is known (before, a listed chair
    // would be cleared and announced again at every start).
    if (this.listed || this.deps.registry.lastSuccess() !== null) {
      for (const key of this.announced) {
        if (current.has(key) || !key.startsWith('chair:')) continue;
        const id = key.slice('chair:'.length);
        const node = `${site}_${haId(id)}`;
        for (const e of this.chairEntities(site, id)) publish(this.topic(e, node), '');
        this.deps.logger.info({ deviceId: id }, 'chair removed from Home Assistant');
      }
    } else {
      for (const key of this.announced) current.add(key);
    }
    if (!sameSet(current, this.announced)) {
      this.announced = current;
      this.deps.store
        .set(ANNOUNCED_KEY, JSON.stringify([...current].sort()))
        .catch((err: unknown) => this.deps.logger.warn({ err: errorMessage(err) }, 'cannot store the announced Home Assistant chairs'));
    }
  }

  /**
   * A config as it reads, or, where the broker does not take that (Mosquitto's
   * message_size_limit, its Maximum Packet Size), in Home Assistant's short form, about a fifth
   * smaller: known before, or learned from a refusal, after which the short form goes at once.
   */
  private publishConfig(topic: string, config: Record<string, unknown>): void {
    const whole = JSON.stringify(config);
    const short = (): string => {
      const payload = JSON.stringify(abbreviated(config, this.deps.topics.base));
      if (!this.saidShort) {
        this.saidShort = true;
        this.deps.logger.info(
          { topic, bytes: Buffer.byteLength(whole), shortBytes: Buffer.byteLength(payload), refusedAt: this.deps.sizeLimit.refusedAt() },
          "a Home Assistant config is larger than the broker takes; such configs go in Home Assistant's short form (abbreviated keys)",
        );
      }
      return payload;
    };
    this.deps.sizeLimit.publishRetained(topic, whole, short, (err) => this.deps.logger.debug({ topic, err: errorMessage(err) }, 'discovery publish not acknowledged'));
  }

  /** Who publishes the configs (Home Assistant shows it in the device's MQTT info and logs). */
  private origin(): Record<string, string> {
    return { name: 'chair-agent', sw_version: this.deps.version, ...(this.deps.supportUrl ? { support_url: this.deps.supportUrl } : {}) };
  }

  private siteEntities(site: string): Entity[] {
    const t = this.deps.topics;
    const base = (objectId: string, name: string, component: Entity['component'], extra: Record<string, unknown>): Entity => this.siteEntity(site, objectId, name, component, extra);
    const agentUp = AGENT_UP(t);
    return [
      base('backlog', 'Backlog', 'sensor', { state_topic: t.bridgeInfo, value_template: '{{ value_json.backlog.pending }}', unit_of_measurement: 'records', state_class: 'measurement', icon: 'mdi:tray-full', ...agentUp }),
      base('vendor', 'Vendor API', 'binary_sensor', { state_topic: t.bridgeInfo, value_template: "{{ 'ON' if value_json.vendor.reachable else 'OFF' }}", device_class: 'connectivity', ...agentUp }),
      base('broker', 'Broker', 'binary_sensor', { state_topic: t.bridgeState, value_template: "{{ 'ON' if value_json.state == 'online' else 'OFF' }}", device_class: 'connectivity' }),
      base('last_sync', 'Last sync', 'sensor', { state_topic: t.bridgeInfo, value_template: '{{ value_json.lastSyncAt }}', device_class: 'timestamp', ...agentUp }),
      ...this.todayEntities(site),
      ...(this.deps.webhookHttps ? [this.certificateEntity(site)] : []),
    ];
  }

  /**
   * Today at a glance (B/summary) for the site: uses, minutes and takings (the total over every
   * payment method).
   */
  private todayEntities(site: string): Entity[] {
    return todayFigures((objectId, name, extra) => this.siteEntity(site, objectId, name, 'sensor', { ...extra, ...AGENT_UP(this.deps.topics) }), this.deps.topics.summary, this.deps.currency, 'site');
  }

  /** When the webhook port's certificate expires ("None", so unknown, while none has loaded). */
  private certificateEntity(site: string): Entity {
    const t = this.deps.topics;
    return this.siteEntity(site, 'webhook_certificate', 'Webhook certificate expires', 'sensor', {
      state_topic: t.bridgeInfo,
      value_template: '{{ value_json.webhookCertificate.expiresAt if value_json.webhookCertificate is defined else none }}',
      device_class: 'timestamp',
      entity_category: 'diagnostic',
      icon: 'mdi:certificate',
      ...AGENT_UP(t),
    });
  }

  /** An entity of the site box's device. */
  private siteEntity(site: string, objectId: string, name: string, component: Entity['component'], extra: Record<string, unknown>): Entity {
    const device = { identifiers: [site], name: `Chair agent ${this.deps.siteId}`, manufacturer: 'chair-agent', model: 'Site box', sw_version: this.deps.version };
    return {
      component,
      objectId,
      config: { name, unique_id: `${site}_${objectId}`, default_entity_id: defaultEntityId(component, `${site}_${objectId}`), device, origin: this.origin(), ...extra },
    };
  }

  private chairEntities(site: string, deviceId: string): Entity[] {
    const t = this.deps.topics;
    const node = `${site}_${haId(deviceId)}`;
    const state = t.chair(deviceId);
    const view = this.deps.registry.view(deviceId);
    const device = {
      identifiers: [node],
      name: view?.state?.deviceName ?? `Chair ${deviceId}`,
      manufacturer: 'Massage chair (vendor cloud)',
      model: 'Massage chair',
      ...(view?.state?.firmwareVersion ? { sw_version: view.state.firmwareVersion } : {}),
      ...(view?.state?.location ? { suggested_area: view.state.location } : {}),
      via_device: site,
    };
    const availability = {
      availability: [
        { topic: t.bridgeState, value_template: ONLINE_TEMPLATE },
        { topic: t.availability(deviceId), value_template: ONLINE_TEMPLATE },
      ],
      availability_mode: 'all',
    };
    const base = (objectId: string, name: string, component: Entity['component'], extra: Record<string, unknown>): Entity => ({
      component,
      objectId,
      config: { name, unique_id: `${node}_${objectId}`, default_entity_id: defaultEntityId(component, `${node}_${objectId}`), device, origin: this.origin(), ...availability, ...extra },
    });
    return [
      base('status', 'Status', 'sensor', { state_topic: state, value_template: '{{ value_json.status }}', icon: 'mdi:seat-recline-extra' }),
      base('remaining', 'Remaining', 'sensor', {
        state_topic: state,
        value_template: '{{ value_json.remainingSeconds if value_json.remainingSeconds is not none else 0 }}',
        device_class: 'duration',
        unit_of_measurement: 's',
      }),
      base('running', 'Running', 'binary_sensor', { state_topic: state, value_template: "{{ 'ON' if value_json.running else 'OFF' }}", device_class: 'running' }),
      base('seated', 'Seated', 'binary_sensor', { state_topic: state, value_template: "{{ 'ON' if value_json.seated else 'OFF' }}", device_class: 'occupancy' }),
      base('start', 'Start', 'button', { command_topic: `${state}/start`, payload_press: '{}', icon: 'mdi:play' }),
      // Today's figures are the agent's, not the chair's: shown while the agent is up, even when the vendor no longer lists the chair.
      ...todayFigures(
        (objectId, name, extra) => ({ component: 'sensor', objectId, config: { name, unique_id: `${node}_${objectId}`, default_entity_id: defaultEntityId('sensor', `${node}_${objectId}`), device, origin: this.origin(), ...extra, ...AGENT_UP(t) } }),
        t.chairToday(deviceId),
        this.deps.currency,
      ),
    ];
  }
}

/**
 * Uses, minutes and takings today, of the site (B/summary's `site`) or of one chair (its own day,
 * B/chairs/<DeviceId>/today, there for every chair however many the site has). Each goes back to 0
 * at the site's midnight. Uses only grow within a day: total_increasing, which tells Home
 * Assistant's statistics the drop at midnight is a new count, not a loss. Minutes and takings can
 * also fall within a day (a use's finished record, which wins, may say fewer minutes or a smaller
 * amount than its playing one): to Home Assistant's recorder a fall in a total_increasing sensor is
 * a warning ("not strictly increasing") or, past a tenth, a new meter whose figure it counts again.
 * So they are total, with the day's start as their last reset. The takings have no unit unless
 * site.currency names one (the vendor's Amount does not): then they are money (device class
 * monetary, whose only state class is total).
 */
function todayFigures(
  make: (objectId: string, name: string, extra: Record<string, unknown>) => Entity,
  topic: string,
  currency: string | undefined,
  /** Where the figures are in the payload: under `site` (B/summary), or at its top (a chair's day). */
  under?: 'site',
): Entity[] {
  const value = (field: string): string => `{{ value_json.${under ? `${under}.` : ''}${field} }}`;
  const today = (objectId: string, name: string, field: string, extra: Record<string, unknown>): Entity =>
    make(objectId, name, { state_topic: topic, value_template: value(field), ...extra });
  // The day's start: read with .get, so a retained payload without it (0.3.19) logs nothing.
  const sinceMidnight = { state_class: 'total', last_reset_value_template: "{{ value_json.get('startedAt') or '' }}" };
  const money = currency ? { device_class: 'monetary', unit_of_measurement: currency, suggested_display_precision: 2 } : {};
  return [
    today('uses_today', 'Uses today', 'uses', { state_class: 'total_increasing', unit_of_measurement: 'uses', icon: 'mdi:counter' }),
    today('minutes_today', 'Minutes today', 'minutes', { device_class: 'duration', unit_of_measurement: 'min', ...sinceMidnight }),
    today('takings_today', 'Takings today', 'total', { icon: 'mdi:cash-register', ...sinceMidnight, ...money }),
  ];
}

function sameSet(a: Set<string>, b: Set<string>): boolean {
  return a.size === b.size && [...a].every((x) => b.has(x));
}
