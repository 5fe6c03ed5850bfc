import { spawn } from 'node:child_process';
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
  /** The last_reset attribute (ISO 8601) of a sensor whose state class is total, else null. */
  last_reset: string | null;
  /** What Home Assistant would log as a warning or an error for this entity, and then ignore. */
  problems: string[];
  /** Removed by an empty discovery config. */
  removed: boolean;
}

/**
 * What Home Assistant shows once it has received these messages, in this order, the discovery
 * configs among them: each entity is set up at its config (and handed what is retained on its
 * topics), updated by a new one, and removed by an empty one, after which it reads nothing; its
 * templates rendered by Jinja2 as Home Assistant renders them, the results taken by the rules of
 * its MQTT sensor, binary sensor and availability, and of its recorder. Removed entities are in
 * the answer, with what they logged.
 */
export async function haEntityStates(messages: { topic: string; payload: string }[], discoveryPrefix = 'homeassistant'): Promise<HaEntityState[]> {
  const request = { discoveryPrefix, messages };
  const python = pythonWithJinja2();
  if (python === null) throw new Error('no Python with Jinja2 (sudo apt install python3-jinja2)');
  // Not spawnSync: the agent under test runs in this process, and must go on polling meanwhile.
  const child = spawn(python, [SCRIPT], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  child.stdin.end(JSON.stringify(request));
  const status = await exited;
  if (status !== 0) throw new Error(`ha_entity_states.py: ${stderr}`);
  return (JSON.parse(stdout) as { entities: HaEntityState[] }).entities;
}
