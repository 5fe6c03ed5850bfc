import { afterAll, expect, it } from 'vitest';
import { formatVendorTime } from '../../agent/time/vendor-time.js';
import { haEntityStates, type HaEntityState } from '../helpers/ha-entity-states.js';
import { vendorRecord } from '../helpers/records.js';
import { startRig, type Rig } from '../helpers/rig.js';
import type { Subscriber } from '../helpers/subscriber.js';
import { describeWith } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';
import { webhookStatus } from '../helpers/webhook.js';

/**
 * Today's figures as Home Assistant's statistics take them. A use's finished record wins over its
 * playing one and may say fewer minutes or a smaller amount (the customer stopped early), so a
 * chair's and the site's minutes and takings can fall within a day. Home Assistant's recorder
 * warns of a total_increasing sensor that falls, and counts a larger fall again as a new meter;
 * a total sensor with a last reset may fall. Rendered with Jinja2 by Home Assistant's rules, the
 * recorder's reset_detected among them (ha_entity_states.py).
 */
const SITE = 'hall-05';
const B = `chair-agent/${SITE}`;
let rig: Rig | undefined;

afterAll(() => rig?.close());

const json = (text: string | undefined): Record<string, unknown> => JSON.parse(text ?? '{}') as Record<string, unknown>;
const problems = (states: HaEntityState[]): string[] => states.flatMap((e) => e.problems.map((p) => `${e.unique_id}: ${p}`));
const shown = (states: HaEntityState[], uniqueId: string): string | undefined => states.find((e) => e.unique_id === uniqueId && !e.removed)?.state;

describeWith(['jinja2', 'mosquitto'], "Home Assistant's statistics of today's figures", () => {
  it('takes minutes and takings that fall within a day (a finished record says less) without a warning or a count made twice', async () => {
    rig = await startRig({
      site: SITE,
      minuteMs: 2_000,
      subscribe: [`${B}/#`, 'homeassistant/#'],
      sections: { site: { currency: 'THB' }, gpio: { driver: 'sim', chairs: [{ deviceId: 'MC7001', button: 17, led: 27 }] }, homeassistant: { enabled: true } },
    });
    const { base } = rig;
    const s = rig.sub as Subscriber;
    const day = (): Record<string, unknown> => json(s.last(`${B}/chairs/MC7001/today`)?.text);
    await waitFor(() => day()['uses'] === 0, "MC7001's day");

    // The webhook's playing record asks for 10 minutes at 200.00; the finished one says 9 and 180.00.
    const use = { TransactionId: 'STAT-1', DeviceId: 'MC7001', TransactionTime: formatVendorTime(Date.now(), 'Asia/Bangkok'), PaymentMethod: 'promptpay' };
    expect(await webhookStatus(base, vendorRecord({ ...use, Status: 'playing', PlayTime: '10', Amount: '200.00' }))).toBe(200);
    await waitFor(() => day()['minutes'] === 10, 'MC7001: 10 minutes');
    expect(await webhookStatus(base, vendorRecord({ ...use, Status: 'finished', PlayTime: '9', Amount: '180.00' }))).toBe(200);
    await waitFor(() => day()['minutes'] === 9 && json(s.last(`${B}/summary`)?.text)['site'] !== undefined && (json(s.last(`${B}/summary`)?.text)['site'] as Record<string, unknown>)['minutes'] === 9, 'MC7001 and the site: 9 minutes');
    expect(day()).toMatchObject({ uses: 1, total: '180.00' });

    const messages = s.messages.map((m) => ({ topic: m.topic, payload: m.text }));
    const states = await haEntityStates(messages);
    expect(problems(states)).toEqual([]);
    const chair = `chair_agent_${SITE}_MC7001`;
    expect([shown(states, `${chair}_uses_today`), shown(states, `${chair}_minutes_today`), shown(states, `${chair}_takings_today`)]).toEqual(['1', '9', '180.00']);
    expect(shown(states, `chair_agent_${SITE}_minutes_today`)).toBe('9');

    // The same messages with the figures announced total_increasing, as up to 0.3.20: the recorder
    // would have warned of the minutes' and the takings' fall, for the chair and for the site.
    const before = messages.map((m) => {
      if (!/\/(minutes|takings)_today\/config$/.test(m.topic) || m.payload === '') return m;
      const { last_reset_value_template: _, ...rest } = json(m.payload);
      return { ...m, payload: JSON.stringify({ ...rest, state_class: 'total_increasing', ...(rest['device_class'] === 'monetary' ? { device_class: undefined, unit_of_measurement: undefined } : {}) }) };
    });
    const warned = problems(await haEntityStates(before)).filter((p) => p.includes('not strictly increasing'));
    expect(warned.map((p) => p.split(':')[0]).sort()).toEqual([`${chair}_minutes_today`, `${chair}_takings_today`, `chair_agent_${SITE}_minutes_today`, `chair_agent_${SITE}_takings_today`].sort());
  });
});
