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
