import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { pythonWithJinja2 } from './tool-detect.js';

const SCRIPT = fileURLToPath(new URL('./py/ha_entity_states.py', import.meta.url));

/** An entity as Home Assistant shows it (test/helpers/py/ha_entity_states.py). */
export interface HaEntityState {
  unique_id: string;
  platform: string;
  /** "unavailable", "unknown", "on", "off", or the value (a timestamp in UTC). */
  state: string;
  available: boolean;
  /** What Home Assistant would log as a warning or an error for this entity, and then ignore. */
  problems: string[];
}

/**
 * What Home Assistant shows for the entities of these discovery configs once it has received
 * these messages, in this order: their templates rendered by Jinja2 as Home Assistant renders
 * them, the results taken by the rules of its MQTT sensor, binary sensor and availability.
 */
export function haEntityStates(configs: { platform: string; config: Record<string, unknown> }[], messages: { topic: string; payload: string }[]): Map<string, HaEntityState> {
  const python = pythonWithJinja2();
  if (python === null) throw new Error('no Python with Jinja2 (sudo apt install python3-jinja2)');
  const r = spawnSync(python, [SCRIPT], { input: JSON.stringify({ entities: configs, messages }), encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`ha_entity_states.py: ${r.stderr}`);
  const out = JSON.parse(r.stdout) as { entities: HaEntityState[] };
  return new Map(out.entities.map((e) => [e.unique_id, e]));
}
