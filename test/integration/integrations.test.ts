import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mqtt from 'mqtt';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { build, type Agent } from '../../agent/build.js';
import { createLogger } from '../../agent/platform/logger.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { TEST_API_KEY, TEST_SECRET, testConfig } from '../helpers/config.js';
import { freePort } from '../helpers/ports.js';
import { Subscriber, type Received } from '../helpers/subscriber.js';
import { waitFor } from '../helpers/wait.js';
import { describeWith } from '../helpers/tools.js';
import { publishOnce } from '../helpers/publish-once.js';

/**
 * What site systems expect, against the simulator and a real broker: a vendor account that spans
 * two sites (vendor.location), the bridge request API, POS correlation, chair names kept after a
 * start, and Home Assistant discovery.
 */
const SITE = 'integ';
const B = `chair-agent/${SITE}`;
let broker: TestBroker;
let sim: Simulator;
let agent: Agent;
let sub: Subscriber;
let port: number;
let dbPath: string;
const logLines: string[] = [];

const config = (over: Record<string, Record<string, unknown>> = {}) =>
  testConfig(
    { vendorUrl: sim.url, brokerUrl: broker.url, dbPath },
    {
      site: { id: SITE },
      // Spaces and case differ from the vendor's "Ladprao Mall": both are ignored.
      vendor: { location: ' ladprao mall ' },
      http: { host: '127.0.0.1', port },
      transactions: { syncSchedule: '* * * * * *' },
      gpio: { driver: 'sim', chairs: [{ deviceId: 'MC7001', button: 17, led: 27 }, { deviceId: 'MC7003', button: 22, led: 23 }] },
      homeassistant: { enabled: true },
      log: { level: 'info' },
      ...over,
    },
  );

const newAgent = (over: Record<string, Record<string, unknown>> = {}): Agent =>
  build(config(over), { logger: createLogger({ level: 'info', destination: { write: (l: string) => void logLines.push(l) } }) });

beforeAll(async () => {
  broker = await startBroker();
  port = await freePort();
  dbPath = join(mkdtempSync(join(tmpdir(), 'integ-')), 'agent.db');
  sim = new Simulator({
    apiKey: TEST_API_KEY,
    chairs: 4,
    locations: ['Ladprao Mall', 'Airport T1'],
    minuteMs: 400,
    webhook: { url: `http://127.0.0.1:${port}/vendor/webhook`, secret: TEST_SECRET },
  });
  await sim.start();
  sub = await Subscriber.connect(broker.url, [`${B}/#`, 'homeassistant/#'], { protocolVersion: 5 });
  agent = newAgent();
  await agent.start();
  // Bridge requests are answered once the agent's subscription to them is in place, which
  // start() does not wait for: ask until one is answered, so no test's first request is lost.
  await waitFor(async () => {
    const since = sub.mark();
    await sub.client.publishAsync(`${B}/bridge/request/health_check`, '{}', { qos: 1 });
    return sub.waitFor((x) => x.topic === `${B}/bridge/response/health_check`, 'a health_check answer', since, 1_000).then(
      () => true,
      () => false,
    );
  }, 'the bridge answering requests');
}, 30_000);

afterAll(async () => {
  await agent?.stop();
  await sub?.close();
  await sim?.close();
  await broker?.stop();
});

/** Sends a bridge request and waits for its answer on B/bridge/response/<name>. */
async function request(name: string, payload: string | Buffer, opts: mqtt.IClientPublishOptions = {}): Promise<Record<string, unknown>> {
  const since = sub.mark();
  await sub.client.publishAsync(`${B}/bridge/request/${name}`, payload, { qos: 1, ...opts });
  const m = await sub.waitFor((x) => x.topic === `${B}/bridge/response/${name}`, `response to ${name}`, since);
  return JSON.parse(m.text) as Record<string, unknown>;
}

const transactions = (): Record<string, unknown>[] => sub.messages.filter((m) => m.topic.startsWith(`${B}/transactions/`)).map((m) => JSON.parse(m.text) as Record<string, unknown>);

describeWith('mosquitto', 'a vendor account that spans sites (vendor.location)', () => {
  it('keeps only the chairs of its Location', async () => {
    await sub.waitFor((m) => m.topic === `${B}/chairs/MC7003`, 'MC7003 state');
    const chairs = await request('chairs', '{}');
    expect(chairs['status']).toBe('ok');
    expect((chairs['data'] as { deviceId: string }[]).map((c) => c.deviceId).sort()).toEqual(['MC7001', 'MC7003']);
    expect(sub.messages.some((m) => m.topic.includes('MC7002') || m.topic.includes('MC7004'))).toBe(false);
  });

  it("stores and publishes only its Location's transactions, from the webhook and the list", async () => {
    expect(sim.paidUse('MC7002', 1).ok).toBe(true); // Airport T1
    expect(sim.paidUse('MC7003', 1).ok).toBe(true); // Ladprao Mall
    await waitFor(() => transactions().some((t) => t['DeviceId'] === 'MC7003' && t['Status'] === 'finished'), 'the Ladprao session finished and published', 20_000);
    await waitFor(() => sim.model.transactions.filter((t) => t.record['DeviceId'] === 'MC7002' && t.record['Status'] === 'finished').length > 0, 'the Airport session over');
    const synced = await request('sync', '{}');
    expect(synced['status']).toBe('ok');
    expect(transactions().some((t) => t['DeviceId'] === 'MC7002')).toBe(false);
  });
});

describeWith('mosquitto', 'today at a glance', () => {
  type Totals = { uses: number; minutes: number; takings: Record<string, string>; total: string };
  type Summary = { date: string; timeZone: string; site: Totals; chairs: Record<string, Totals> };
  const satang = (amount: string | undefined): bigint => BigInt((amount ?? '0.00').replace('.', ''));

  it("publishes today's uses, minutes and exact takings on B/summary, /metrics and the bridge API, counting a use once", async () => {
    const before = (await request('summary', '{}'))['data'] as Summary;
    expect(before.timeZone).toBe('Asia/Bangkok');
    // No site.currency here: the summary names none.
    expect(before).not.toHaveProperty('currency');
    const was = before.chairs['MC7001'] ?? { uses: 0, minutes: 0, takings: {}, total: '0.00' };
    const since = sub.mark();
    expect(sim.paidUse('MC7001', 1).ok).toBe(true);
    // The webhook's "playing" record, then the list's "finished" one: one use.
    const finished = (m: Received): boolean => m.topic === `${B}/transactions/MC7001` && (JSON.parse(m.text) as { Status: string }).Status === 'finished';
    await sub.waitFor(finished, 'the session finished and published', since, 20_000);
    await request('sync', '{}');
    const summary = (await request('summary', '{}'))['data'] as Summary;
    expect(summary.chairs['MC7001']?.uses).toBe(was.uses + 1);
    // Published at most once a second after a change: waited for, not looked for at once.
    await sub.waitFor((m) => m.topic === `${B}/summary` && (JSON.parse(m.text) as Summary).chairs['MC7001']?.uses === was.uses + 1, 'the summary with the use published', since);
    const published = sub.messages.slice(since).filter((m) => m.topic === `${B}/summary`).map((m) => JSON.parse(m.text) as Summary);
    expect(Math.max(...published.map((p) => p.chairs['MC7001']?.uses ?? 0))).toBe(was.uses + 1);
    const now = summary.chairs['MC7001']!;
    expect(now.minutes).toBe(was.minutes + 1);
    expect(satang(now.takings['promptpay']) - satang(was.takings['promptpay'])).toBe(2000n); // 20.00 a minute in the simulator
    // Only this Location's chairs; the site's line adds up.
    expect(Object.keys(summary.chairs).every((id) => id === 'MC7001' || id === 'MC7003')).toBe(true);
    expect(summary.site.uses).toBe(Object.values(summary.chairs).reduce((n, c) => n + c.uses, 0));
    // Retained: a late subscriber gets it.
    const late = await Subscriber.connect(broker.url, `${B}/summary`);
    const retained = await late.waitFor(() => true, 'the retained summary');
    expect(retained.retain).toBe(true);
    await late.close();
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toContain(`chair_agent_day_uses_total{device_id="MC7001"} ${now.uses}`);
    expect(metrics).toContain(`chair_agent_day_takings_total{device_id="MC7001",method="promptpay"} ${Number(now.takings['promptpay'])}`);
  });
});

describeWith('mosquitto', 'bridge request API', () => {
  it('answers health_check, info, outbox and chairs', async () => {
    const health = await request('health_check', '{"transaction":"h-1"}');
    expect(health).toMatchObject({ status: 'ok', transaction: 'h-1', data: { healthy: true } });
    const info = await request('info', '');
    expect(info['data']).toMatchObject({ siteId: SITE, broker: { connected: true } });
    const outbox = await request('outbox', '{}');
    expect(outbox['data']).toMatchObject({ pending: expect.any(Number), delivered: expect.any(Number) });
  });

  it('publishes stored records again from a seq, for a consumer that lost data', async () => {
    await waitFor(() => transactions().length > 0, 'a transaction published');
    const first = transactions()[0] as { agent: { seq: number }; TransactionId: string };
    const before = transactions().filter((t) => t['TransactionId'] === first.TransactionId).length;
    const answer = await request('resend', JSON.stringify({ fromSeq: first.agent.seq, toSeq: first.agent.seq }));
    expect(answer).toMatchObject({ status: 'ok', data: { records: 1, firstSeq: first.agent.seq, lastSeq: first.agent.seq } });
    await waitFor(() => transactions().filter((t) => t['TransactionId'] === first.TransactionId).length === before + 1, 'the record again');
    const byTime = await request('resend', JSON.stringify({ from: new Date(Date.now() - 3_600_000).toISOString(), limit: 1 }));
    expect(byTime).toMatchObject({ status: 'ok', data: { records: 1, more: true } });
  });

  it('republishes bridge/info as soon as a sync finishes, not at the next minute', async () => {
    const since = sub.mark();
    agent.health.synced(Date.now());
    const info = await sub.waitFor((m) => m.topic === `${B}/bridge/info`, 'bridge/info after the sync', since, 5_000);
    expect((JSON.parse(info.text) as { lastSyncAt: string | null }).lastSyncAt).toMatch(/\+07:00$/);
  });

  it('changes the log level until restart', async () => {
    const at = logLines.length;
    expect(await request('log_level', '{"level":"debug"}')).toMatchObject({ status: 'ok', data: { level: 'debug', was: 'info' } });
    await waitFor(() => logLines.slice(at).some((l) => l.includes('"level":"debug"')), 'a debug line from a component');
    expect(await request('log_level', '{"level":"info"}')).toMatchObject({ status: 'ok', data: { level: 'info', was: 'debug' } });
  });

  it.each([
    ['an unknown request', 'reboot', '{}', 'unknown_request'],
    ['a payload that is not JSON', 'info', '{nope', 'invalid_payload'],
    ['a JSON array', 'info', '[1]', 'invalid_payload'],
    ['an unknown parameter', 'outbox', '{"verbose":true}', 'invalid_parameter'],
    ['a bad level', 'log_level', '{"level":"loud"}', 'invalid_parameter'],
    ['a resend without a start', 'resend', '{}', 'invalid_parameter'],
    ['a resend with a bad time', 'resend', '{"from":"yesterday"}', 'invalid_parameter'],
    ['a payload over 4 KiB', 'info', JSON.stringify({ pad: 'x'.repeat(5000) }), 'invalid_payload'],
    ['a name of several levels (Zigbee2MQTT: device/rename)', 'device/rename', '{"from":"a","to":"b"}', 'unknown_request'],
  ])('answers %s with an error shaped as Zigbee2MQTT does, and keeps serving', async (_what, name, payload, code) => {
    const answer = await request(name, payload);
    // {"status":"error","data":{},"error":"<human message>","code":"<stable code>"}
    expect(answer).toMatchObject({ status: 'error', data: {}, code });
    expect(typeof answer['error']).toBe('string');
    expect(answer['error']).not.toBe(code);
    expect(await request('health_check', '')).toMatchObject({ status: 'ok' });
  });

  it('honours an MQTT 5 response topic and correlation data, and refuses one with a wildcard', async () => {
    const reply = 'pos/replies/42';
    await sub.client.subscribeAsync(reply, { qos: 1 });
    const since = sub.mark();
    await sub.client.publishAsync(`${B}/bridge/request/info`, '{}', { qos: 1, properties: { responseTopic: reply, correlationData: Buffer.from('c-42') } });
    const m = await sub.waitFor((x: Received) => x.topic === reply, 'the answer on the response topic', since);
    expect(m.properties?.correlationData?.toString()).toBe('c-42');
    // A wildcard: Mosquitto 2.0.11 forwards it and the agent refuses it; 2.0.21 drops the sender
    // (Protocol Error) and the request never reaches the agent.
    const before = sub.mark();
    const outcome = await publishOnce(broker.url, `${B}/bridge/request/info`, '{}', { properties: { responseTopic: 'pos/#' } });
    if (outcome.accepted) {
      const bad = await sub.waitFor((x) => x.topic === `${B}/bridge/response/info`, 'the refusal', before);
      expect(JSON.parse(bad.text)).toMatchObject({ status: 'error', data: {}, code: 'invalid_response_topic' });
    } else {
      expect(outcome.reasonCode).toBe(0x82);
      expect(await request('health_check', '')).toMatchObject({ status: 'ok' });
      expect(sub.messages.slice(before).filter((x) => x.topic === `${B}/bridge/response/info`)).toEqual([]);
    }
  });

  it('refuses a retained request and clears it', async () => {
    const answer = await request('sync', '{}', { retain: true });
    expect(answer).toMatchObject({ status: 'error', data: {}, code: 'retained_request' });
    await waitFor(() => sub.messages.some((m) => m.topic === `${B}/bridge/request/sync` && m.text === '' ), 'the retained request cleared');
  });
});

describeWith('mosquitto', 'POS correlation and chair names', () => {
  it("ties the chair's next transaction record to the start that carried a transaction", async () => {
    const since = sub.mark();
    await sub.client.publishAsync(`${B}/chairs/MC7001/start`, JSON.stringify({ minutes: 5, transaction: 'pos-1' }), { qos: 1 });
    const answer = await sub.waitFor((m) => m.topic === `${B}/chairs/MC7001/start/response`, 'start response', since, 20_000);
    expect(JSON.parse(answer.text)).toEqual({ status: 'ok', transaction: 'pos-1' });
    const rec = await sub.waitFor((m) => m.topic === `${B}/transactions/MC7001`, 'the record of that run', since, 20_000);
    expect(JSON.parse(rec.text).agent.startRequest).toMatchObject({ transaction: 'pos-1', source: 'mqtt', at: expect.stringMatching(/\+07:00$/) });
    // Every state published for the chair since the start kept its names.
    const states = sub.messages.slice(since).filter((m) => m.topic === `${B}/chairs/MC7001`).map((m) => JSON.parse(m.text) as Record<string, unknown>);
    expect(states.length).toBeGreaterThan(0);
    for (const s of states) expect(s).toMatchObject({ deviceName: 'Massage Chair 1', deviceCode: 'C01', location: 'Ladprao Mall' });
  });
});

describeWith('mosquitto', 'Home Assistant discovery', () => {
  const configs = (since = 0): Map<string, Record<string, unknown> | null> => {
    const out = new Map<string, Record<string, unknown> | null>();
    for (const m of sub.messages.slice(since)) if (m.topic.startsWith('homeassistant/') && m.topic.endsWith('/config')) out.set(m.topic, m.text === '' ? null : (JSON.parse(m.text) as Record<string, unknown>));
    return out;
  };

  it('announces a device per chair and one for the site box, with what HA requires', async () => {
    await waitFor(() => configs().size >= 23, 'every discovery config');
    const all = [...configs().entries()].filter(([, c]) => c !== null) as [string, Record<string, unknown>][];
    expect(all).toHaveLength(23); // 7 site-box entities + 8 for each of the 2 chairs
    const uniqueIds = new Set(all.map(([, c]) => c['unique_id']));
    expect(uniqueIds.size).toBe(23);
    for (const [topic, c] of all) {
      expect(topic).toMatch(/^homeassistant\/(sensor|binary_sensor|button)\/[A-Za-z0-9_-]+\/[A-Za-z0-9_-]+\/config$/);
      expect(c).toMatchObject({ name: expect.any(String), unique_id: expect.any(String), device: { identifiers: [expect.any(String)] } });
      if (topic.startsWith('homeassistant/button/')) expect(c['command_topic']).toMatch(new RegExp(`^${B}/chairs/MC700[13]/start$`));
      else expect(c['state_topic']).toMatch(new RegExp(`^${B}/`));
    }
    const chairStatus = all.find(([t]) => t.includes('MC7001') && t.includes('/sensor/') && t.endsWith('_status/config'))?.[1] ?? all.find(([, c]) => String(c['unique_id']).endsWith('MC7001_status'))?.[1];
    expect(chairStatus).toMatchObject({
      availability_mode: 'all',
      availability: [{ topic: `${B}/bridge/state` }, { topic: `${B}/chairs/MC7001/availability` }],
      device: { via_device: 'chair_agent_integ', name: 'Massage Chair 1' },
    });
  });

  it('starts the chair when the HA button is pressed', async () => {
    const button = [...configs().values()].find((c) => c !== null && c['command_topic'] === `${B}/chairs/MC7003/start`) as Record<string, unknown>;
    await waitFor(() => agent.registry.view('MC7003')?.state?.startable, 'MC7003 idle again');
    const since = sub.mark();
    await sub.client.publishAsync(button['command_topic'] as string, button['payload_press'] as string, { qos: 1 });
    const answer = await sub.waitFor((m) => m.topic === `${B}/chairs/MC7003/start/response`, 'start response', since, 20_000);
    expect(JSON.parse(answer.text)).toEqual({ status: 'ok' });
  });

  it("announces again when Home Assistant's birth message says online", async () => {
    const since = sub.mark();
    await sub.client.publishAsync('homeassistant/status', 'online', { qos: 1 });
    await waitFor(() => configs(since).size >= 23, 'the configs again');
  });

  it('clears the configs of a chair that is gone, after a restart, and keeps the unique ids', async () => {
    const before = configs();
    await agent.stop();
    const since = sub.mark();
    // MC7003 leaves the config, and the site's Location changes: nothing lists it now.
    agent = newAgent({ vendor: { location: 'Airport T1' }, gpio: { driver: 'sim', chairs: [{ deviceId: 'MC7001', button: 17, led: 27 }] } });
    await agent.start();
    await waitFor(() => [...configs(since).entries()].filter(([t, c]) => t.includes('MC7003') && c === null).length === 8, 'MC7003 cleared');
    // Its retained state, availability and day are deleted from the broker too (empty retained messages).
    await sub.waitFor((m) => m.topic === `${B}/chairs/MC7003` && m.text === '', 'MC7003 state cleared', since);
    await sub.waitFor((m) => m.topic === `${B}/chairs/MC7003/availability` && m.text === '', 'MC7003 availability cleared', since);
    await sub.waitFor((m) => m.topic === `${B}/chairs/MC7003/today` && m.text === '', "MC7003's day cleared", since);
    await waitFor(() => [...configs(since).keys()].some((t) => t.includes('MC7004')), 'MC7004 announced');
    const id = (m: Map<string, Record<string, unknown> | null>): unknown => [...m.values()].find((c) => c !== null && String(c['unique_id']).endsWith('MC7001_status'))?.['unique_id'];
    expect(id(configs(since))).toBe(id(before));
  });

  it('clears a chair the vendor stops listing once the grace period is over, and restores it when it returns', async () => {
    await agent.stop();
    agent = newAgent({ vendor: { location: 'Airport T1', forgetChairAfterMinutes: 0.05 }, gpio: { driver: 'sim', chairs: [{ deviceId: 'MC7001', button: 17, led: 27 }] } });
    await agent.start();
    await waitFor(() => agent.registry.view('MC7004')?.online, 'MC7004 listed');
    const since = sub.mark();
    const mc7004 = sim.model.chairs.get('MC7004')!;
    mc7004.hidden = true;
    try {
      // First offline (the grace period), then gone: state, availability and the five HA configs.
      const offline = await sub.waitFor((m) => m.topic === `${B}/chairs/MC7004/availability` && m.text === '{"state":"offline"}', 'MC7004 offline', since);
      const cleared = await sub.waitFor((m) => m.topic === `${B}/chairs/MC7004/availability` && m.text === '', 'MC7004 availability cleared', since);
      expect(sub.messages.indexOf(cleared)).toBeGreaterThan(sub.messages.indexOf(offline));
      await sub.waitFor((m) => m.topic === `${B}/chairs/MC7004` && m.text === '', 'MC7004 state cleared', since);
      await sub.waitFor((m) => m.topic === `${B}/chairs/MC7004/today` && m.text === '', "MC7004's day cleared", since);
      await waitFor(() => [...configs(since).entries()].filter(([t, c]) => t.includes('MC7004') && c === null).length === 8, 'MC7004 configs cleared');
      expect(agent.registry.view('MC7004')).toBeNull();
      // The configured chair, missing from this Location's list all along, is kept.
      expect([...configs(since).entries()].filter(([t, c]) => t.includes('MC7001') && c === null)).toEqual([]);
    } finally {
      mc7004.hidden = false;
    }
    const back = sub.mark();
    await sub.waitFor((m) => m.topic === `${B}/chairs/MC7004/availability` && m.text === '{"state":"online"}', 'MC7004 back online', back);
    await sub.waitFor((m) => m.topic === `${B}/chairs/MC7004` && m.text.includes('"deviceId":"MC7004"'), 'MC7004 state again', back);
    await sub.waitFor((m) => m.topic === `${B}/chairs/MC7004/today` && m.text.includes('"deviceId":"MC7004"'), "MC7004's day again", back);
    await waitFor(() => [...configs(back).entries()].filter(([t, c]) => t.includes('MC7004') && c !== null).length === 8, 'MC7004 announced again');
  });
});
