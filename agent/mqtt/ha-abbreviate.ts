/**
 * A discovery config in the short form Home Assistant also reads: its abbreviated keys and a base
 * topic ("~"). Sent only where the broker does not take the readable form (Mosquitto's
 * message_size_limit, a Maximum Packet Size): it is about a fifth smaller, and Home Assistant turns
 * it back into the same config before it validates it (homeassistant/components/mqtt/discovery.py:
 * _replace_all_abbreviations, then _replace_topic_base).
 */

/**
 * The keys the agent sends, as abbreviations.py abbreviates them (ABBREVIATIONS; the same table
 * serves each item of `availability`). A key with none (via_device) goes as it is.
 */
const KEYS: Readonly<Record<string, string>> = {
  availability: 'avty',
  availability_mode: 'avty_mode',
  availability_template: 'avty_tpl',
  availability_topic: 'avty_t',
  command_topic: 'cmd_t',
  default_entity_id: 'def_ent_id',
  device: 'dev',
  device_class: 'dev_cla',
  entity_category: 'ent_cat',
  icon: 'ic',
  last_reset_value_template: 'lrst_val_tpl',
  origin: 'o',
  payload_press: 'pl_prs',
  state_class: 'stat_cla',
  state_topic: 'stat_t',
  suggested_display_precision: 'sug_dsp_prc',
  topic: 't',
  unique_id: 'uniq_id',
  unit_of_measurement: 'unit_of_meas',
  value_template: 'val_tpl',
};

/** DEVICE_ABBREVIATIONS. */
const DEVICE_KEYS: Readonly<Record<string, string>> = { identifiers: 'ids', manufacturer: 'mf', model: 'mdl', sw_version: 'sw', suggested_area: 'sa' };

/** ORIGIN_ABBREVIATIONS. */
const ORIGIN_KEYS: Readonly<Record<string, string>> = { sw_version: 'sw', support_url: 'url' };

/** Home Assistant's topic base key: a topic value that starts with it starts with its value. */
const TOPIC_BASE = '~';

function renamed(o: Record<string, unknown>, keys: Readonly<Record<string, string>>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [keys[k] ?? k, v]));
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The short form of a config whose topics are under `base` (B). Home Assistant also replaces a "~"
 * at a topic's end, so a config with a topic that ends in one (a DeviceId such as "MC~") keeps
 * its topics whole.
 */
export function abbreviated(config: Record<string, unknown>, base: string): Record<string, unknown> {
  const topics: string[] = [];
  for (const [k, v] of Object.entries(config)) if (k.endsWith('topic') && typeof v === 'string') topics.push(v);
  const availability = Array.isArray(config['availability']) ? config['availability'].filter(isObject) : [];
  for (const a of availability) if (typeof a['topic'] === 'string') topics.push(a['topic']);
  const useBase = topics.some((t) => t.startsWith(`${base}/`)) && !topics.some((t) => t.endsWith(TOPIC_BASE));
  const short = (t: unknown): unknown => (useBase && typeof t === 'string' && t.startsWith(`${base}/`) ? `${TOPIC_BASE}${t.slice(base.length)}` : t);

  const out: Record<string, unknown> = useBase ? { [TOPIC_BASE]: base } : {};
  for (const [k, v] of Object.entries(config)) {
    let value = v;
    if (k.endsWith('topic')) value = short(v);
    else if (k === 'device' && isObject(v)) value = renamed(v, DEVICE_KEYS);
    else if (k === 'origin' && isObject(v)) value = renamed(v, ORIGIN_KEYS);
    else if (k === 'availability' && Array.isArray(v)) value = v.map((a) => (isObject(a) ? renamed({ ...a, ...('topic' in a ? { topic: short(a['topic']) } : {}) }, KEYS) : a));
    out[KEYS[k] ?? k] = value;
  }
  return out;
}
