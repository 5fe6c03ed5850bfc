/**
 * Home Assistant's MQTT discovery schemas for the three platforms the agent announces, ported
 * key by key from Home Assistant's source (home-assistant/core, HA 2026, the probatio era):
 *
 * - homeassistant/components/mqtt/config.py: MQTT_BASE_SCHEMA (qos, encoding, group),
 *   MQTT_RO_SCHEMA (+ state_topic required, value_template);
 * - homeassistant/components/mqtt/schemas.py: _MQTT_AVAILABILITY_SCHEMA (availability_topic
 *   XOR availability[], availability_mode in all/any/latest), MQTT_ENTITY_DEVICE_INFO_SCHEMA
 *   (identifiers or connections required), MQTT_ORIGIN_INFO_SCHEMA (name required, sw_version,
 *   support_url), MQTT_ENTITY_COMMON_SCHEMA (device, entity_picture, origin, enabled_by_default,
 *   entity_category, icon, json_attributes_topic/template, default_entity_id,
 *   message_expiry_interval, unique_id, visible_by_default). There is no object_id: it was
 *   deprecated in 2025.10 and is gone;
 * - homeassistant/components/mqtt/sensor.py, binary_sensor.py, button.py: each platform's
 *   PLATFORM_SCHEMA_MODERN, and DISCOVERY_SCHEMA = that schema with extra=REMOVE_EXTRA.
 *
 * REMOVE_EXTRA means Home Assistant drops an unknown key without a word: a misspelt key is a
 * feature silently lost. So this port treats every key outside the platform's schema as an error.
 */

type Check = (value: unknown, path: string) => string[];

/** homeassistant/const.py: _OBJECT_ID = (?!_)[\da-z_]+(?<!_), _DOMAIN = (?!.+__) + _OBJECT_ID. */
const VALID_ENTITY_ID = /^(?!.+__)(?!_)[\da-z_]+(?<!_)\.(?!_)[\da-z_]+(?<!_)$/;

const str: Check = (v, p) => (typeof v === 'string' ? [] : [`${p}: expected a string`]);
const bool: Check = (v, p) => (typeof v === 'boolean' ? [] : [`${p}: expected a boolean`]);
const int: Check = (v, p) => (Number.isInteger(v) && (v as number) >= 0 ? [] : [`${p}: expected a whole number >= 0`]);
const oneOf =
  (values: readonly string[]): Check =>
  (v, p) =>
    typeof v === 'string' && values.includes(v) ? [] : [`${p}: expected one of ${values.join(', ')}`];
const url: Check = (v, p) => {
  if (typeof v !== 'string') return [`${p}: expected a URL`];
  try {
    const u = new URL(v);
    return ['http:', 'https:', 'homeassistant:'].includes(u.protocol) ? [] : [`${p}: not an http(s) URL`];
  } catch {
    return [`${p}: not a URL`];
  }
};
/** valid_subscribe_topic / valid_publish_topic: non-empty UTF-8 without NUL, publish without wildcards. */
const subscribeTopic: Check = (v, p) => (typeof v === 'string' && v.length > 0 && !v.includes('\0') ? [] : [`${p}: not a valid subscribe topic`]);
const publishTopic: Check = (v, p) => [...subscribeTopic(v, p), ...(typeof v === 'string' && /[+#]/.test(v) ? [`${p}: a publish topic has no wildcards`] : [])];
/** cv.icon: "prefix:name". */
const icon: Check = (v, p) => (typeof v === 'string' && /^[a-z0-9-]+:[a-z0-9-]+$/.test(v) ? [] : [`${p}: expected an icon like mdi:name`]);
const stringList: Check = (v, p) => (Array.isArray(v) ? v.flatMap((x, i) => str(x, `${p}[${i}]`)) : str(v, p));

function object(schema: Record<string, Check>, required: string[] = []): Check {
  return (v, p) => {
    if (!v || typeof v !== 'object' || Array.isArray(v)) return [`${p}: expected an object`];
    const o = v as Record<string, unknown>;
    const errors = required.filter((k) => !(k in o)).map((k) => `${p}.${k}: required`);
    for (const [k, value] of Object.entries(o)) {
      const check = schema[k];
      errors.push(...(check ? check(value, `${p}.${k}`) : [`${p}.${k}: not in Home Assistant's schema (it would be dropped without a word)`]));
    }
    return errors;
  };
}

const DEVICE = object({
  identifiers: stringList,
  connections: (v, p) => (Array.isArray(v) ? v.flatMap((c, i) => (Array.isArray(c) && c.length === 2 ? stringList(c, `${p}[${i}]`) : [`${p}[${i}]: a pair`])) : [`${p}: a list`]),
  manufacturer: str,
  model: str,
  model_id: str,
  name: str,
  hw_version: str,
  serial_number: str,
  sw_version: str,
  via_device: str,
  suggested_area: str,
  configuration_url: url,
});
const deviceCheck: Check = (v, p) => {
  const errors = DEVICE(v, p);
  const d = (v ?? {}) as Record<string, unknown>;
  const ids = d['identifiers'];
  const hasIds = Array.isArray(ids) ? ids.length > 0 : typeof ids === 'string' && ids !== '';
  const conns = d['connections'];
  if (!hasIds && !(Array.isArray(conns) && conns.length > 0)) errors.push(`${p}: Device must have at least one identifying value in 'identifiers' and/or 'connections'`);
  return errors;
};

const ORIGIN = object({ name: str, sw_version: str, support_url: url }, ['name']);

const AVAILABILITY_ITEM = object({ topic: subscribeTopic, payload_available: str, payload_not_available: str, value_template: str }, ['topic']);

/** homeassistant.helpers.entity.ENTITY_CATEGORIES_SCHEMA */
const ENTITY_CATEGORIES = ['config', 'diagnostic'] as const;

const BASE: Record<string, Check> = { qos: (v, p) => (v === 0 || v === 1 || v === 2 ? [] : [`${p}: 0, 1 or 2`]), encoding: str, group: stringList };
const AVAILABILITY: Record<string, Check> = {
  availability_topic: subscribeTopic,
  availability_template: str,
  payload_available: str,
  payload_not_available: str,
  availability_mode: oneOf(['all', 'any', 'latest']),
  availability: (v, p) => (Array.isArray(v) ? v.flatMap((x, i) => AVAILABILITY_ITEM(x, `${p}[${i}]`)) : [`${p}: a list`]),
};
const COMMON: Record<string, Check> = {
  ...AVAILABILITY,
  device: deviceCheck,
  entity_picture: url,
  origin: ORIGIN,
  enabled_by_default: bool,
  entity_category: oneOf(ENTITY_CATEGORIES),
  icon,
  json_attributes_topic: subscribeTopic,
  json_attributes_template: str,
  default_entity_id: str,
  message_expiry_interval: int,
  unique_id: str,
  visible_by_default: bool,
};
const RO: Record<string, Check> = { ...BASE, state_topic: subscribeTopic, value_template: str };

/** The device classes the agent may use, from each platform's enum (SensorDeviceClass, BinarySensorDeviceClass, ButtonDeviceClass). */
const SENSOR_DEVICE_CLASSES = ['duration', 'timestamp', 'enum', 'date', 'temperature', 'power', 'energy', 'monetary'] as const;
const BINARY_DEVICE_CLASSES = ['connectivity', 'running', 'occupancy', 'problem', 'power', 'plug', 'presence', 'moving'] as const;

const PLATFORMS = {
  sensor: object(
    {
      ...RO,
      ...COMMON,
      device_class: oneOf(SENSOR_DEVICE_CLASSES),
      expire_after: int,
      force_update: bool,
      last_reset_value_template: str,
      name: str,
      options: stringList,
      suggested_display_precision: int,
      state_class: oneOf(['measurement', 'measurement_angle', 'total', 'total_increasing']),
      unit_of_measurement: str,
    },
    ['state_topic'],
  ),
  binary_sensor: object(
    { ...RO, ...COMMON, device_class: oneOf(BINARY_DEVICE_CLASSES), expire_after: int, force_update: bool, name: str, off_delay: int, payload_off: str, payload_on: str },
    ['state_topic'],
  ),
  button: object({ ...BASE, ...COMMON, command_template: str, command_topic: publishTopic, device_class: oneOf(['identify', 'restart', 'update']), name: str, payload_press: str, retain: bool }, ['command_topic']),
} as const;

export type HaPlatform = keyof typeof PLATFORMS;

/** Every problem Home Assistant's schema (as ported) finds in a discovery payload; [] when valid. */
export function haSchemaErrors(platform: HaPlatform, config: unknown): string[] {
  const errors = PLATFORMS[platform](config, platform);
  const c = (config ?? {}) as Record<string, unknown>;
  if ('availability' in c && 'availability_topic' in c) errors.push(`${platform}: availability and availability_topic are exclusive`);
  // default_entity_id is a string to the schema; an entity id must then pass VALID_ENTITY_ID
  // (homeassistant/const.py): <domain>.<object id>, [a-z0-9_] with no "__" anywhere and no "_" at
  // either end of a part. Without the domain, Home Assistant names the entity "unnamed_device".
  const id = c['default_entity_id'];
  if (typeof id === 'string' && !(id.startsWith(`${platform}.`) && VALID_ENTITY_ID.test(id))) errors.push(`${platform}.default_entity_id: must be "${platform}.<object id>" as Home Assistant's VALID_ENTITY_ID allows`);
  return errors;
}

/**
 * homeassistant/components/mqtt/abbreviations.py: the abbreviations of the keys the three
 * platforms above take (ABBREVIATIONS, the same for each item of `availability`;
 * DEVICE_ABBREVIATIONS; ORIGIN_ABBREVIATIONS). def_ent_id (2025.10), o, sug_dsp_prc and the origin's
 * came after the oldest of its versions this port was checked against.
 */
const ABBREVIATIONS: Record<string, string> = {
  avty: 'availability',
  avty_mode: 'availability_mode',
  avty_t: 'availability_topic',
  avty_tpl: 'availability_template',
  cmd_t: 'command_topic',
  cmd_tpl: 'command_template',
  def_ent_id: 'default_entity_id',
  dev: 'device',
  dev_cla: 'device_class',
  e: 'encoding',
  en: 'enabled_by_default',
  ent_cat: 'entity_category',
  ent_pic: 'entity_picture',
  exp_aft: 'expire_after',
  frc_upd: 'force_update',
  ic: 'icon',
  json_attr_t: 'json_attributes_topic',
  json_attr_tpl: 'json_attributes_template',
  lrst_val_tpl: 'last_reset_value_template',
  name: 'name',
  o: 'origin',
  obj_id: 'object_id',
  off_dly: 'off_delay',
  ops: 'options',
  pl_avail: 'payload_available',
  pl_not_avail: 'payload_not_available',
  pl_off: 'payload_off',
  pl_on: 'payload_on',
  pl_prs: 'payload_press',
  ret: 'retain',
  stat_cla: 'state_class',
  stat_t: 'state_topic',
  sug_dsp_prc: 'suggested_display_precision',
  t: 'topic',
  uniq_id: 'unique_id',
  unit_of_meas: 'unit_of_measurement',
  val_tpl: 'value_template',
};
const DEVICE_ABBREVIATIONS: Record<string, string> = {
  cns: 'connections',
  cu: 'configuration_url',
  ids: 'identifiers',
  name: 'name',
  mf: 'manufacturer',
  mdl: 'model',
  mdl_id: 'model_id',
  hw: 'hw_version',
  sw: 'sw_version',
  sa: 'suggested_area',
  sn: 'serial_number',
};
const ORIGIN_ABBREVIATIONS: Record<string, string> = { name: 'name', sw: 'sw_version', url: 'support_url' };

const TOPIC_BASE = '~';

function replaceAbbreviations(payload: unknown, abbreviations: Record<string, string>): void {
  if (!payload || typeof payload !== 'object' || Array.isArray(payload)) return;
  const o = payload as Record<string, unknown>;
  for (const key of Object.keys(abbreviations).filter((k) => k in o)) {
    const value = o[key];
    delete o[key];
    o[abbreviations[key] as string] = value;
  }
}

/**
 * A discovery payload as Home Assistant reads it before its schema (mqtt/discovery.py,
 * async_discovery_message_received): _replace_all_abbreviations, then _replace_topic_base,
 * which puts the base ("~") in place of a "~" at either end of a value whose key ends in "topic",
 * and of an availability item's topic.
 */
export function haExpandDiscovery(payload: Record<string, unknown>): Record<string, unknown> {
  const p = structuredClone(payload);
  replaceAbbreviations(p, ABBREVIATIONS);
  if ('origin' in p) replaceAbbreviations(p['origin'], ORIGIN_ABBREVIATIONS);
  if ('device' in p) replaceAbbreviations(p['device'], DEVICE_ABBREVIATIONS);
  if ('availability' in p) for (const a of [p['availability']].flat()) replaceAbbreviations(a, ABBREVIATIONS);
  if (TOPIC_BASE in p) {
    const base = String(p[TOPIC_BASE]);
    delete p[TOPIC_BASE];
    for (const [key, value] of Object.entries(p)) {
      if (typeof value !== 'string' || value === '' || !key.endsWith('topic')) continue;
      if (value.startsWith(TOPIC_BASE)) p[key] = `${base}${value.slice(1)}`;
      if (value.endsWith(TOPIC_BASE)) p[key] = `${value.slice(0, -1)}${base}`;
    }
    if (p['availability']) {
      for (const a of [p['availability']].flat()) {
        if (!a || typeof a !== 'object') continue;
        const item = a as Record<string, unknown>;
        const topic = String(item['topic']);
        if (topic.startsWith(TOPIC_BASE)) item['topic'] = `${base}${topic.slice(1)}`;
        if (topic.endsWith(TOPIC_BASE)) item['topic'] = `${topic.slice(0, -1)}${base}`;
      }
    }
  }
  return p;
}
