import { afterAll, expect, it } from 'vitest';
import { haEntityStates, type HaEntityState } from '../helpers/ha-entity-states.js';
import { haExpandDiscovery } from '../helpers/ha-mqtt-schema.js';
import { doctorAt, startRig, type Rig } from '../helpers/rig.js';
import { retainedOn, type Subscriber } from '../helpers/subscriber.js';
import { describeWith } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Home Assistant behind a site broker with a small message size limit (Mosquitto's
 * message_size_limit 1024) and a site with a long id: each chair's configs are about 1 KiB as
 * they read, and the broker refuses those over. Refused, a config goes again in Home Assistant's
 * short form (abbreviated keys, a "~" topic base), and every entity is there. Rendered with
 * Jinja2 by Home Assistant's rules (ha_entity_states.py, which expands the short form as
 * mqtt/discovery.py does).
 */
const SITE = 'central-world-bangkok-level-3';
const B = `chair-agent/${SITE}`;
const CHAIRS = ['MC7001', 'MC7002', 'MC7003'];
let rig: Rig | undefined;

afterAll(() => rig?.close());

const json = (text: string | undefined): Record<string, unknown> => JSON.parse(text ?? '{}') as Record<string, unknown>;
const problems = (states: HaEntityState[]): string[] => states.flatMap((e) => e.problems.map((p) => `${e.unique_id}: ${p}`));

describeWith(['jinja2', 'mosquitto'], 'Home Assistant behind a broker with message_size_limit 1024', () => {
  it("every entity is there: a config the broker refuses as too large goes again in Home Assistant's short form", async () => {
    rig = await startRig({
      site: SITE,
      chairs: CHAIRS.length,
      subscribe: [`${B}/#`, 'homeassistant/#'],
      broker: { extra: 'message_size_limit 1024\n' },
      sections: { site: { currency: 'THB' }, homeassistant: { enabled: true, supportUrl: 'https://support.example.com/chair-agent' } },
    });
    const s = rig.sub as Subscriber;
    const configs = (): Map<string, string> => new Map(s.messages.filter((m) => m.topic.startsWith('homeassistant/') && m.topic.endsWith('/config')).map((m) => [m.topic, m.text]));
    // The site box's 7 entities and each chair's 8.
    await waitFor(() => [...configs().values()].filter((p) => p !== '').length === 7 + 8 * CHAIRS.length || undefined, 'every config taken by the broker');
    expect(rig.sim.paidUse('MC7001', 5).ok).toBe(true);
    await waitFor(() => json(s.last(`${B}/chairs/MC7001/today`)?.text)['uses'] === 1, "MC7001's use today");

    // The broker refused some as they read, and took them short: counted, not warned of (nothing
    // was lost), said once; the connection stayed.
    const refused = Number((await (await fetch(`${rig.base}/metrics`)).text()).match(/^chair_agent_mqtt_refused_total\{class="discovery"\} (\d+)/m)?.[1]);
    expect(refused).toBeGreaterThan(0);
    expect(rig.lines.filter((l) => l.level === 'warn' || l.level === 'error')).toEqual([]);
    expect(rig.lines.filter((l) => l.msg.startsWith('a Home Assistant config is larger than the broker takes'))).toHaveLength(1);
    expect(rig.lines.filter((l) => l.msg === 'connected to the broker')).toHaveLength(1);
    // Short exactly where the config as it reads is over the limit (the same keys and values, so
    // the same bytes, once expanded), as it reads everywhere else.
    const bytes = (payload: string): number => Buffer.byteLength(JSON.stringify(haExpandDiscovery(json(payload))));
    const short = [...configs()].filter(([, p]) => p.startsWith('{"~":'));
    expect(short.length).toBeGreaterThanOrEqual(refused);
    for (const [t, p] of configs()) if (p !== '') expect(bytes(p) > 1024, t).toBe(short.some(([st]) => st === t));
    // Retained short: what Home Assistant reads after a restart.
    const [topic] = short[0] as [string, string];
    expect(await retainedOn(rig.broker.url, topic)).toMatch(/^\{"~":"chair-agent\/central-world-bangkok-level-3"/);

    const states = await haEntityStates(s.messages.map((m) => ({ topic: m.topic, payload: m.text })));
    expect(problems(states)).toEqual([]);
    expect(states.filter((e) => !e.removed)).toHaveLength(7 + 8 * CHAIRS.length);
    const shown = (id: string): string | undefined => states.find((e) => e.unique_id === `chair_agent_${SITE}_${id}`)?.state;
    for (const chair of CHAIRS) {
      for (const entity of ['status', 'remaining', 'running', 'seated', 'start', 'uses_today', 'minutes_today', 'takings_today']) {
        expect(shown(`${chair}_${entity}`), `${chair} ${entity}`).not.toBe('unavailable');
      }
    }
    expect([shown('MC7001_uses_today'), shown('MC7001_minutes_today'), shown('MC7001_takings_today')]).toEqual(['1', '5', '100.00']);
    expect(shown('uses_today')).toBe('1');

    // doctor reads the agent's report: refusals counted, none held back, so not a failure.
    const r = await doctorAt(rig, SITE);
    expect(r.stdout, r.stdout).toMatch(new RegExp(`ok\\s+refusals\\s+the broker refused ${refused} publish\\(es\\): discovery ${refused}; none is held back now`));
  });
});
