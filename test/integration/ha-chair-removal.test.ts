import { afterAll, expect, it } from 'vitest';
import { haEntityStates } from '../helpers/ha-entity-states.js';
import { startRig, type Rig } from '../helpers/rig.js';
import type { Subscriber } from '../helpers/subscriber.js';
import { describeWith } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';

/**
 * A chair leaves the site (the vendor stops listing it, and it is not in the config): its Home
 * Assistant entities go, and its retained topics are cleared. Home Assistant reads every message
 * on a topic an entity still reads, an empty one too, and an empty payload is a template error in
 * its log; so the entities must be gone first. Rendered with Jinja2 by Home Assistant's rules,
 * with entities set up and removed as their discovery configs arrive (ha_entity_states.py over_time).
 */
const SITE = 'hall-07';
const B = `chair-agent/${SITE}`;
let rig: Rig | undefined;

afterAll(() => rig?.close());

describeWith(['jinja2', 'mosquitto'], 'Home Assistant when a chair leaves the site', () => {
  it('removes the chair from Home Assistant before its retained topics are cleared, so nothing lands in its log', async () => {
    rig = await startRig({
      site: SITE,
      minuteMs: 2_000,
      subscribe: [`${B}/#`, 'homeassistant/#'],
      sections: {
        // MC7002 is not configured: gone 3 s after the vendor stops listing it.
        vendor: { forgetChairAfterMinutes: 0.05 },
        gpio: { driver: 'sim', chairs: [{ deviceId: 'MC7001', button: 17, led: 27 }] },
        homeassistant: { enabled: true },
      },
    });
    const { sim } = rig;
    const s = rig.sub as Subscriber;
    const isMc7002Config = (topic: string): boolean => topic.startsWith('homeassistant/') && topic.includes('_MC7002/') && topic.endsWith('/config');
    const mc7002Topics = [`${B}/chairs/MC7002`, `${B}/chairs/MC7002/availability`, `${B}/chairs/MC7002/today`];
    await waitFor(() => new Set(s.messages.filter((m) => isMc7002Config(m.topic) && m.text !== '').map((m) => m.topic)).size === 8, "MC7002's 8 configs");
    await waitFor(() => mc7002Topics.every((t) => s.last(t)?.text), "MC7002's state, availability and day");
    expect(sim.paidUse('MC7002', 5).ok).toBe(true);
    await waitFor(() => s.last(`${B}/chairs/MC7002`)?.text.includes('"running":true'), 'MC7002 running');

    (sim.model.chairs.get('MC7002') as { hidden: boolean }).hidden = true;
    await waitFor(() => new Set(s.messages.filter((m) => isMc7002Config(m.topic) && m.text === '').map((m) => m.topic)).size === 8, "MC7002's configs cleared", 20_000);
    await waitFor(() => mc7002Topics.every((t) => s.last(t)?.text === ''), "MC7002's retained topics cleared", 20_000);

    // Every config is cleared before any of the topics its entities read.
    const lastConfigCleared = s.messages.findLastIndex((m) => isMc7002Config(m.topic) && m.text === '');
    const firstTopicCleared = s.messages.findIndex((m) => mc7002Topics.includes(m.topic) && m.text === '');
    expect(lastConfigCleared).toBeLessThan(firstTopicCleared);

    const states = await haEntityStates(s.messages.map((m) => ({ topic: m.topic, payload: m.text })));
    expect(states.flatMap((e) => e.problems.map((p) => `${e.unique_id}: ${p}`))).toEqual([]);
    expect(states.filter((e) => e.removed).map((e) => e.unique_id).sort()).toEqual(
      ['status', 'remaining', 'running', 'seated', 'start', 'uses_today', 'minutes_today', 'takings_today'].map((x) => `chair_agent_${SITE}_MC7002_${x}`).sort(),
    );
    // The chair that stays, and the site box, are there as before.
    expect(states.filter((e) => !e.removed)).toHaveLength(7 + 8);
    expect(states.find((e) => e.unique_id === `chair_agent_${SITE}_MC7001_status`)?.state).toBe('Available');
  });
});
