import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { ChairRegistry } from '../../agent/core/chair-registry.js';
import { BrokerError, type Broker } from '../../agent/mqtt/broker.js';
import { abbreviated } from '../../agent/mqtt/ha-abbreviate.js';
import { PACKET_TOO_LARGE } from '../../agent/mqtt/packet-size.js';
import { BrokerSizeLimit } from '../../agent/mqtt/size-limit.js';
import { BIRTH_INTERVAL_MS, HaDiscovery } from '../../agent/mqtt/ha-discovery.js';
import { Topics } from '../../agent/mqtt/topics.js';
import { FakeClock, settle } from '../helpers/fake-clock.js';
import { haExpandDiscovery, haSchemaErrors, type HaPlatform } from '../helpers/ha-mqtt-schema.js';
import { memoryLogger } from '../helpers/memory-logger.js';

/**
 * A connected broker that keeps the last retained payload per topic, and counts publishes; with a
 * limit, it refuses a larger payload as Mosquitto's message_size_limit does (PUBACK 0x95).
 */
function recordingBroker(limit = Infinity): { broker: Broker; retained: Map<string, string>; published: () => number; refused: string[] } {
  const retained = new Map<string, string>();
  const refused: string[] = [];
  let count = 0;
  const broker = Object.assign(new EventEmitter(), {
    connected: true,
    description: 'recording',
    maximumPacketSize: () => undefined,
    publish: async (topic: string, payload: string | Buffer) => {
      count += 1;
      if (Buffer.byteLength(payload) > limit) {
        refused.push(topic);
        throw new BrokerError('refused', 'Publish error: Packet too large (reason code 0x95)', PACKET_TOO_LARGE);
      }
      retained.set(topic, payload.toString());
    },
    subscribe: async () => undefined,
    unsubscribe: async () => undefined,
  }) as unknown as Broker;
  return { broker, retained, published: () => count, refused };
}

function discovery(supportUrl?: string, siteId = 'ladprao-01', webhookHttps = false, currency?: string, limit = Infinity) {
  const { broker, retained, published, refused } = recordingBroker(limit);
  const logger = memoryLogger();
  const clock = new FakeClock();
  const registry = new ChairRegistry({ timeZone: 'Asia/Bangkok', availableStatuses: ['Available'], staleAfterMs: 15_000, forgetAfterMs: 3_600_000, expected: [] });
  const reading = (deviceId: string) => ({ deviceId, deviceCode: 'C01', deviceName: `Massage Chair ${deviceId}`, location: 'Ladprao Mall', status: 'Available', seated: false, leftMin: null, leftSec: null, serverTime: '2026-11-22 12:00:00', firmwareVersion: '01.04.12' });
  registry.applyList([reading('MC7001'), reading('weird id/ß')], 0);
  const state = new Map<string, string>();
  const ha = new HaDiscovery({
    broker,
    sizeLimit: new BrokerSizeLimit(broker),
    clock,
    topics: new Topics('chair-agent', siteId),
    registry,
    store: { get: (k) => state.get(k), set: async (k, v) => void state.set(k, v) },
    logger: logger.logger,
    prefix: 'homeassistant',
    siteId,
    version: '1.2.3',
    supportUrl,
    configured: ['MC7002'],
    webhookHttps,
    currency,
  });
  return { ha, broker, clock, retained, published, refused, lines: logger.lines };
}

function announced(supportUrl?: string, siteId = 'ladprao-01', webhookHttps = false, currency?: string): Map<string, string> {
  const { ha, retained } = discovery(supportUrl, siteId, webhookHttps, currency);
  ha.announce();
  return retained;
}

describe("Home Assistant discovery, against Home Assistant's own schemas", () => {
  it('every config is valid for its platform: default_entity_id, origin, and no key Home Assistant would drop', () => {
    const configs = [...announced('https://support.example.com/chairs')].filter(([t, payload]) => t.startsWith('homeassistant/') && payload !== '');
    // The site box (7 entities) and three chairs (8 each): configured, listed, and an odd DeviceId.
    expect(configs).toHaveLength(7 + 3 * 8);
    for (const [topic, payload] of configs) {
      const platform = topic.split('/')[1] as HaPlatform;
      const config = JSON.parse(payload) as Record<string, unknown>;
      expect(haSchemaErrors(platform, config), topic).toEqual([]);
      expect(config).not.toHaveProperty('object_id');
      expect(config['origin']).toEqual({ name: 'chair-agent', sw_version: '1.2.3', support_url: 'https://support.example.com/chairs' });
    }
  });

  it('gives each entity the id Home Assistant should use, stable and lower case', () => {
    const retained = announced();
    const status = JSON.parse(retained.get('homeassistant/sensor/chair_agent_ladprao-01_MC7001/status/config') as string) as Record<string, unknown>;
    expect(status['default_entity_id']).toBe('sensor.chair_agent_ladprao_01_mc7001_status');
    expect(status['unique_id']).toBe('chair_agent_ladprao-01_MC7001_status');
    expect(status['origin']).toEqual({ name: 'chair-agent', sw_version: '1.2.3' });
  });

  it('a site id and DeviceIds with odd characters still give entity ids Home Assistant accepts', () => {
    // site.id allows [a-z0-9_-]+: "--", "-_" and a trailing "-" all become "_" runs.
    const retained = announced(undefined, '-mall--01_-');
    const configs = [...retained].filter(([t, payload]) => t.startsWith('homeassistant/') && payload !== '');
    expect(configs).toHaveLength(7 + 3 * 8);
    for (const [topic, payload] of configs) {
      const config = JSON.parse(payload) as Record<string, unknown>;
      expect(haSchemaErrors(topic.split('/')[1] as HaPlatform, config), topic).toEqual([]);
    }
    const weird = configs.find(([t]) => t.includes('weird_id') && t.endsWith('/status/config'));
    expect((JSON.parse(weird?.[1] ?? '{}') as Record<string, unknown>)['default_entity_id']).toMatch(/^sensor\.chair_agent_mall_01_weird_id_[0-9a-f]{8}_status$/);
  });

  it('with HTTPS on the webhook port, the site box shows when its certificate expires; without, that entity is cleared', () => {
    const topic = 'homeassistant/sensor/chair_agent_ladprao-01/webhook_certificate/config';
    const https = announced(undefined, 'ladprao-01', true);
    const config = JSON.parse(https.get(topic) as string) as Record<string, unknown>;
    expect(haSchemaErrors('sensor', config)).toEqual([]);
    expect(config).toMatchObject({ state_topic: 'chair-agent/ladprao-01/bridge/info', device_class: 'timestamp', entity_category: 'diagnostic', default_entity_id: 'sensor.chair_agent_ladprao_01_webhook_certificate' });
    expect([...https.keys()].filter((t) => t.startsWith('homeassistant/') && (https.get(t) ?? '') !== '')).toHaveLength(8 + 3 * 8);
    // A site that served HTTPS and no longer does: an empty retained config removes the entity.
    expect(announced().get(topic)).toBe('');
  });

  it("with site.currency, today's takings of the site and of each chair are money in it, reset at the site's midnight", () => {
    const retained = announced(undefined, 'ladprao-01', false, 'THB');
    const takings = [...retained].filter(([t, payload]) => t.endsWith('/takings_today/config') && payload !== '');
    expect(takings).toHaveLength(1 + 3);
    expect(JSON.parse(retained.get('homeassistant/sensor/chair_agent_ladprao-01_MC7001/takings_today/config') as string)).toMatchObject({ state_topic: 'chair-agent/ladprao-01/chairs/MC7001/today' });
    for (const [topic, payload] of takings) {
      const config = JSON.parse(payload) as Record<string, unknown>;
      expect(haSchemaErrors('sensor', config), topic).toEqual([]);
      expect(config).toMatchObject({ device_class: 'monetary', unit_of_measurement: 'THB', state_class: 'total' });
      // The site's from B/summary, each chair's from its own day (there however many chairs the site has).
      const isSite = topic === 'homeassistant/sensor/chair_agent_ladprao-01/takings_today/config';
      expect(config['state_topic'], topic).toMatch(isSite ? /^chair-agent\/ladprao-01\/summary$/ : /^chair-agent\/ladprao-01\/chairs\/[^/]+\/today$/);
      expect(config['value_template'], topic).toBe(isSite ? '{{ value_json.site.total }}' : '{{ value_json.total }}');
      expect(config['last_reset_value_template']).toContain('startedAt');
    }
    // Without a currency the takings have no unit, and are reset at midnight all the same.
    const plain = announced();
    const config = (objectId: string): Record<string, unknown> => JSON.parse(plain.get(`homeassistant/sensor/chair_agent_ladprao-01/${objectId}/config`) as string) as Record<string, unknown>;
    expect(config('takings_today')).toMatchObject({ state_class: 'total', last_reset_value_template: "{{ value_json.get('startedAt') or '' }}" });
    expect(config('takings_today')).not.toHaveProperty('unit_of_measurement');
    expect(config('takings_today')).not.toHaveProperty('device_class');
    // Minutes can fall within a day (a finished record says fewer than its playing one): total,
    // reset at midnight. Uses only grow: total_increasing, whose drop at midnight is a new count.
    expect(config('minutes_today')).toMatchObject({ device_class: 'duration', state_class: 'total', last_reset_value_template: "{{ value_json.get('startedAt') or '' }}" });
    expect(config('uses_today')).toMatchObject({ state_class: 'total_increasing' });
    expect(config('uses_today')).not.toHaveProperty('last_reset_value_template');
  });

  it('the ported schema refuses what Home Assistant would drop or reject', () => {
    expect(haSchemaErrors('sensor', { state_topic: 'a', object_id: 'x', unique_id: 'u' })).toEqual(["sensor.object_id: not in Home Assistant's schema (it would be dropped without a word)"]);
    expect(haSchemaErrors('button', { unique_id: 'u' })).toEqual(['button.command_topic: required']);
    expect(haSchemaErrors('sensor', { state_topic: 'a', origin: { sw_version: '1' } })).toEqual(['sensor.origin.name: required']);
    const refused = ['sensor.default_entity_id: must be "sensor.<object id>" as Home Assistant\'s VALID_ENTITY_ID allows'];
    expect(haSchemaErrors('sensor', { state_topic: 'a', default_entity_id: 'MC7001' })).toEqual(refused);
    expect(haSchemaErrors('sensor', { state_topic: 'a', default_entity_id: 'sensor.mall__01' })).toEqual(refused);
    expect(haSchemaErrors('sensor', { state_topic: 'a', default_entity_id: 'sensor.mall_01_' })).toEqual(refused);
    expect(haSchemaErrors('sensor', { state_topic: 'a', default_entity_id: 'binary_sensor.mall_01' })).toEqual(refused);
  });

  it("announces again for Home Assistant's birth message, and once per 10 s for a client repeating it", async () => {
    const { ha, broker, clock, published } = discovery();
    ha.start();
    await clock.advance(0);
    const perAnnouncement = published();
    expect(perAnnouncement).toBeGreaterThan(10);
    const birth = (payload = 'online') => broker.emit('message', { topic: 'homeassistant/status', payload: Buffer.from(payload), retained: false });
    birth();
    await clock.advance(0);
    expect(published()).toBe(2 * perAnnouncement);
    // A thousand more within the interval, and "offline" among them: one more announcement, at its end.
    for (let i = 0; i < 1000; i++) birth(i % 2 ? 'online' : 'offline');
    await clock.advance(BIRTH_INTERVAL_MS - 1);
    expect(published()).toBe(2 * perAnnouncement);
    await clock.advance(1);
    expect(published()).toBe(3 * perAnnouncement);
    // Quiet for the interval: the next birth is announced at once again.
    await clock.advance(BIRTH_INTERVAL_MS);
    expect(published()).toBe(3 * perAnnouncement);
    birth();
    await clock.advance(0);
    expect(published()).toBe(4 * perAnnouncement);
    await ha.stop();
  });
});

describe("Home Assistant's short form, for a broker with a size limit", () => {
  const site = 'central-world-bangkok-level-3';
  const configs = (retained: Map<string, string>): [string, string][] => [...retained].filter(([t, payload]) => t.startsWith('homeassistant/') && payload !== '');

  it('is the same config to Home Assistant, in fewer bytes', () => {
    const whole = configs(announced('https://support.example.com/chairs', site, true, 'THB'));
    expect(whole).toHaveLength(8 + 3 * 8);
    for (const [topic, payload] of whole) {
      const config = JSON.parse(payload) as Record<string, unknown>;
      const short = abbreviated(config, `chair-agent/${site}`);
      expect(haExpandDiscovery(short), topic).toEqual(config);
      expect(short, topic).toHaveProperty('~', `chair-agent/${site}`);
      expect(Buffer.byteLength(JSON.stringify(short)), topic).toBeLessThan(0.9 * Buffer.byteLength(payload));
    }
  });

  it('keeps the topics whole when one ends in "~", which Home Assistant would replace with the base', () => {
    const base = 'chair-agent/s';
    const config = { state_topic: `${base}/chairs/MC~`, availability: [{ topic: `${base}/bridge/state` }, { topic: `${base}/chairs/MC~/availability` }], unique_id: 'u' };
    const short = abbreviated(config, base);
    expect(short).not.toHaveProperty('~');
    expect(short).toEqual({ stat_t: `${base}/chairs/MC~`, avty: [{ t: `${base}/bridge/state` }, { t: `${base}/chairs/MC~/availability` }], uniq_id: 'u' });
    expect(haExpandDiscovery(short)).toEqual(config);
  });

  it('a config the broker refuses as too large goes at once in the short form, and every one as large after it', async () => {
    const { ha, retained, refused, lines, published } = discovery('https://support.example.com/chairs', site, false, 'THB', 1024);
    ha.announce();
    await settle();
    // Some of each chair's configs are over 1 KiB with this site id: refused once, then taken short.
    expect(refused.length).toBeGreaterThan(0);
    const shown = configs(retained);
    expect(shown).toHaveLength(7 + 3 * 8);
    for (const [topic, payload] of shown) {
      const config = JSON.parse(payload) as Record<string, unknown>;
      expect(haSchemaErrors(topic.split('/')[1] as HaPlatform, haExpandDiscovery(config)), topic).toEqual([]);
      expect('~' in config, topic).toBe(refused.includes(topic));
    }
    expect(lines.filter((l) => l.msg.startsWith('a Home Assistant config is larger than the broker takes'))).toHaveLength(1);
    // Announced again (Home Assistant's birth message): what was refused goes short at once, so no refusal more.
    const before = { refused: refused.length, published: published() };
    ha.announce();
    await settle();
    expect(refused).toHaveLength(before.refused);
    // Each config once (and the certificate's, cleared, as at every announcement).
    expect(published() - before.published).toBe(7 + 3 * 8 + 1);
    expect(configs(retained)).toEqual(shown);
  });
});
