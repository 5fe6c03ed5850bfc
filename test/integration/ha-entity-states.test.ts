import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { build, type Agent } from '../../agent/build.js';
import { createLogger } from '../../agent/platform/logger.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { TEST_API_KEY, testConfig } from '../helpers/config.js';
import { haEntityStates, type HaEntityState } from '../helpers/ha-entity-states.js';
import { freePort } from '../helpers/ports.js';
import { Subscriber } from '../helpers/subscriber.js';
import { issueServerCertificate } from '../helpers/test-ca.js';
import { describeWith } from '../helpers/tools.js';
import { waitFor } from '../helpers/wait.js';

/**
 * What a site's Home Assistant shows of the agent: the discovery configs and every message the
 * agent published on the topics they read, as Home Assistant receives them, rendered by Jinja2
 * (the engine Home Assistant renders value templates with) and taken by Home Assistant's rules
 * for MQTT sensors, binary sensors and availability (test/helpers/py/ha_entity_states.py). The
 * schema tests (unit/ha-discovery) say Home Assistant accepts the configs; these say every entity
 * then shows the agent's value, and nothing lands in Home Assistant's log.
 */
const SITE = 'hall-02';
const B = `chair-agent/${SITE}`;
let broker: TestBroker;
let sim: Simulator;
let agent: Agent;
let sub: Subscriber;
let certificateFile: string;

beforeAll(async () => {
  broker = await startBroker();
  const dir = mkdtempSync(join(tmpdir(), 'ha-states-'));
  const tls = issueServerCertificate(dir, { caName: 'Site CA', name: 'webhook', cn: '127.0.0.1', altNames: 'IP:127.0.0.1' });
  certificateFile = tls.cert;
  sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 2, minuteMs: 2_000 });
  await sim.start();
  // Home Assistant is subscribed before the agent starts, as at a site.
  sub = await Subscriber.connect(broker.url, [`${B}/#`, 'homeassistant/#']);
  const config = testConfig(
    { vendorUrl: sim.url, brokerUrl: broker.url, dbPath: join(dir, 'agent.db') },
    {
      site: { id: SITE, currency: 'THB' },
      transactions: { syncSchedule: '* * * * * *' },
      webhook: { port: await freePort(), cert: tls.cert, key: tls.key },
      gpio: { driver: 'sim', chairs: [{ deviceId: 'MC7001', button: 17, led: 27 }, { deviceId: 'MC7002', button: 22, led: 23 }] },
      homeassistant: { enabled: true },
    },
  );
  agent = build(config, { logger: createLogger({ level: 'silent' }) });
  await agent.start();
}, 30_000);

afterAll(async () => {
  await agent?.stop();
  await sub?.close();
  await sim?.close();
  await broker?.stop();
});

const json = (text: string | undefined): Record<string, unknown> => JSON.parse(text ?? '{}') as Record<string, unknown>;

/** The discovery configs received so far, the last of each topic. */
function configs(): { platform: string; config: Record<string, unknown> }[] {
  const last = new Map<string, string>();
  for (const m of sub.messages) if (m.topic.startsWith('homeassistant/') && m.topic.endsWith('/config')) last.set(m.topic, m.text);
  return [...last].filter(([, text]) => text !== '').map(([topic, text]) => ({ platform: topic.split('/')[1] as string, config: json(text) }));
}

/**
 * What Home Assistant shows now, by unique id, having received everything the subscriber has, in
 * order: each entity set up at its config, and handed what is retained on its topics then.
 */
async function shown(): Promise<Map<string, HaEntityState>> {
  const states = await haEntityStates(sub.messages.map((m) => ({ topic: m.topic, payload: m.text })));
  return new Map(states.filter((e) => !e.removed).map((e) => [e.unique_id, e]));
}

const state = (states: Map<string, HaEntityState>, uniqueId: string): string => {
  const e = states.get(uniqueId);
  if (!e) throw new Error(`no entity ${uniqueId}; there are ${[...states.keys()].join(', ')}`);
  return e.state;
};

const problems = (states: Map<string, HaEntityState>): string[] => [...states.values()].flatMap((e) => e.problems.map((p) => `${e.unique_id}: ${p}`));

const site = 'chair_agent_hall-02';
const chair = (id: string): string => `${site}_${id}`;

describeWith(['jinja2', 'mosquitto', 'openssl'], "Home Assistant's view of the agent, rendered by Jinja2", () => {
  it('shows each chair and the site box with the values the agent published, and logs nothing', async () => {
    await waitFor(() => configs().length === 24, 'the 24 discovery configs'); // 8 site box (with the certificate) + 8 per chair
    await waitFor(() => json(sub.last(`${B}/bridge/info`)?.text)['lastSyncAt'] != null, 'a first transaction sync in bridge/info');
    await waitFor(() => sub.last(`${B}/summary`) !== undefined, "today's summary");
    // Each chair's figures are read from its own day, there (0) before it has a use.
    await waitFor(() => sub.last(`${B}/chairs/MC7002/today`) !== undefined, "MC7002's day");
    const before = json(sub.last(`${B}/chairs/MC7002/today`)?.text);
    const first = await shown();
    expect(state(first, `${chair('MC7002')}_uses_today`)).toBe(String(before['uses']));
    expect(problems(first)).toEqual([]);
    // Home Assistant's Start button: it publishes payload_press on command_topic.
    const start = configs().find((c) => c.config['unique_id'] === `${chair('MC7001')}_start`)?.config ?? {};
    await sub.client.publishAsync(start['command_topic'] as string, start['payload_press'] as string, { qos: 1 });
    await waitFor(() => json(sub.last(`${B}/chairs/MC7001`)?.text)['running'] === true, 'MC7001 running');
    // And a customer pays on the other chair: both uses reach today's figures by the sync.
    sim.paidUse('MC7002', 5);
    await waitFor(() => (json(sub.last(`${B}/summary`)?.text)['site'] as Record<string, unknown> | undefined)?.['uses'] === 2, "both uses in today's summary");
    await waitFor(() => ['MC7001', 'MC7002'].every((id) => json(sub.last(`${B}/chairs/${id}/today`)?.text)['uses'] === 1), "both chairs' days");

    // What the agent last published, read in the same turn as shown() takes the messages.
    const info = json(sub.last(`${B}/bridge/info`)?.text);
    const mc7001 = json(sub.last(`${B}/chairs/MC7001`)?.text);
    const mc7002 = json(sub.last(`${B}/chairs/MC7002`)?.text);
    const summary = json(sub.last(`${B}/summary`)?.text);
    const days = Object.fromEntries(['MC7001', 'MC7002'].map((id) => [id, json(sub.last(`${B}/chairs/${id}/today`)?.text)]));
    const states = await shown();
    expect(problems(states)).toEqual([]);
    expect(state(states, `${site}_backlog`)).toBe(String((info['backlog'] as Record<string, unknown>)['pending']));
    const today = summary['site'] as Record<string, unknown>;
    expect(state(states, `${site}_uses_today`)).toBe('2');
    expect(state(states, `${site}_minutes_today`)).toBe(String(today['minutes']));
    expect(Number(state(states, `${site}_minutes_today`))).toBeGreaterThanOrEqual(10);
    expect(state(states, `${site}_takings_today`)).toBe(today['total']);
    expect(Number(state(states, `${site}_takings_today`))).toBeGreaterThan(0);
    // In THB, and reset at the site's midnight (Bangkok's: +07:00) of the day the summary is of.
    expect(states.get(`${site}_takings_today`)?.last_reset).toBe(`${String(summary['date'])}T00:00:00+07:00`);
    // Each chair's own day: the start pressed in Home Assistant on MC7001, the paid use on MC7002.
    const chairs = summary['chairs'] as Record<string, Record<string, unknown>>;
    for (const id of ['MC7001', 'MC7002']) {
      expect(state(states, `${chair(id)}_uses_today`)).toBe('1');
      // The chair's day says what B/summary says of the chair.
      expect(days[id]).toMatchObject({ uses: 1, minutes: chairs[id]?.['minutes'], total: chairs[id]?.['total'] });
      expect(state(states, `${chair(id)}_minutes_today`)).toBe(String(days[id]?.['minutes']));
      expect(state(states, `${chair(id)}_takings_today`)).toBe(days[id]?.['total']);
      expect(states.get(`${chair(id)}_takings_today`)?.last_reset).toBe(states.get(`${site}_takings_today`)?.last_reset);
    }
    expect(Number(state(states, `${chair('MC7002')}_takings_today`))).toBeGreaterThan(0);
    expect(state(states, `${site}_vendor`)).toBe('on');
    expect(state(states, `${site}_broker`)).toBe('on');
    // Timestamps are shown in UTC: the agent's are in the site's offset, and must carry it.
    expect(state(states, `${site}_last_sync`)).toBe(new Date(info['lastSyncAt'] as string).toISOString().replace(/\.\d{3}Z$/, '+00:00'));
    const notAfter = new Date(new X509Certificate(readFileSync(certificateFile)).validTo);
    expect(state(states, `${site}_webhook_certificate`)).toBe(notAfter.toISOString().replace(/\.\d{3}Z$/, '+00:00'));
    expect(state(states, `${chair('MC7001')}_status`)).toBe(mc7001['status']);
    expect(state(states, `${chair('MC7001')}_running`)).toBe('on');
    expect(Number(state(states, `${chair('MC7001')}_remaining`))).toBe(mc7001['remainingSeconds']);
    expect(Number(state(states, `${chair('MC7001')}_remaining`))).toBeGreaterThan(0);
    expect(state(states, `${chair('MC7001')}_seated`)).toBe(mc7001['seated'] ? 'on' : 'off');
    expect(state(states, `${chair('MC7002')}_running`)).toBe(mc7002['running'] ? 'on' : 'off');
    expect(state(states, `${chair('MC7002')}_remaining`)).toBe(String(mc7002['remainingSeconds'] ?? 0));
    // The button has no state: it is shown unknown while available.
    expect(state(states, `${chair('MC7001')}_start`)).toBe('unknown');
  });

  it('shows every entity unavailable, and the broker off, once the agent has stopped', async () => {
    await agent.stop();
    await sub.waitFor((m) => m.topic === `${B}/bridge/state` && m.text === '{"state":"offline"}', 'bridge/state offline');
    const states = await shown();
    expect(problems(states)).toEqual([]);
    expect(state(states, `${site}_broker`)).toBe('off');
    const others = [...states.values()].filter((e) => e.unique_id !== `${site}_broker`);
    expect(others).toHaveLength(23);
    expect(others.filter((e) => e.state !== 'unavailable').map((e) => e.unique_id)).toEqual([]);
  });
});
