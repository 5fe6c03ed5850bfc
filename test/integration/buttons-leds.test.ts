import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import mqtt from 'mqtt';
import { build, type Agent } from '../../agent/build.js';
import type { Simulator } from '../../agent/simulator/simulator.js';
import type { TestBroker } from '../helpers/broker.js';
import { testConfig } from '../helpers/config.js';
import { startRig, type Rig } from '../helpers/rig.js';
import { memoryLogger } from '../helpers/memory-logger.js';
import { retainedOn, Subscriber } from '../helpers/subscriber.js';
import { waitFor } from '../helpers/wait.js';
import { describeWith } from '../helpers/tools.js';

let rig: Rig;
let broker: TestBroker;
let sim: Simulator;
let agent: Agent;
let base: string;
const B = 'chair-agent/press';

beforeAll(async () => {
  rig = await startRig({
    site: 'press',
    chairs: 3,
    sections: {
      gpio: {
        driver: 'sim',
        statusLed: 5,
        debounceMs: 20,
        chairs: [
          { deviceId: 'MC7001', button: 17, led: 27, minutes: 7 },
          { deviceId: 'MC7002', button: 22, led: 23 },
          { deviceId: 'MC7003', button: 24, led: 25 },
        ],
      },
      start: { confirmIntervalSeconds: 0.1, confirmTimeoutSeconds: 5 },
    },
  });
  ({ broker, sim, agent, base } = rig);
  await waitFor(() => agent.registry.view('MC7003')?.online && agent.broker.connected, 'chairs listed and broker connected');
});

afterAll(() => rig.close());

afterEach(() => sim.faults.clear());

const press = (bcm: number): Promise<Response> => fetch(`${base}/sim/gpio/${bcm}/press`, { method: 'POST' });
const gpio = async (): Promise<Record<string, { direction: string; value: number }>> => (await fetch(`${base}/sim/gpio`)).json() as Promise<Record<string, { direction: string; value: number }>>;

describeWith('mosquitto', 'buttons and LEDs through the sim driver', () => {
  it('lists every line the agent uses', async () => {
    expect(await gpio()).toEqual({
      '5': { direction: 'out', value: 1 },
      '17': { direction: 'in', value: 1 },
      '22': { direction: 'in', value: 1 },
      '23': { direction: 'out', value: 1 },
      '24': { direction: 'in', value: 1 },
      '25': { direction: 'out', value: 1 },
      '27': { direction: 'out', value: 1 },
    });
  });

  it('starts a chair with one control call on a press: LED steady, then fast, then slow blink', async () => {
    expect(agent.leds.shown('chair:MC7001')).toBe('on');
    sim.faults.add({ mode: 'slow', delayMs: 400, count: 1, endpoints: ['control'] });
    const before = sim.requests.control;
    const pressed = press(17);
    await waitFor(() => agent.leds.shown('chair:MC7001') === 'fast', 'fast blink while the vendor confirms');
    expect((await pressed).status).toBe(200);
    await waitFor(() => agent.leds.shown('chair:MC7001') === 'slow', 'slow blink while running');
    expect(sim.requests.control).toBe(before + 1);
    const tx = sim.model.transactions.at(-1)?.record;
    expect(tx).toMatchObject({ DeviceId: 'MC7001', PlayTime: '7', PaymentMethod: 'manual' });
  });

  it("lists a running chair once in the status page's events, not at every poll", async () => {
    const polls = sim.requests.lists;
    await waitFor(() => sim.requests.lists >= polls + 3 && agent.registry.view('MC7001')?.state?.running, 'three more polls of the running chair');
    const status = (await (await fetch(`${base}/api/status`)).json()) as { events: { text: string }[] };
    expect(status.events.filter((e) => e.text.startsWith('MC7001: Running'))).toHaveLength(1);
    expect(status.events.map((e) => e.text)).not.toContain('MC7001: Running, running');
  });

  it('refuses a second press during the run without a control call, with failure flashes', async () => {
    const before = sim.requests.control;
    await press(17);
    await waitFor(() => agent.leds.shown('chair:MC7001') === 'flash', 'failure flashes');
    await waitFor(() => agent.leds.shown('chair:MC7001') === 'slow', 'back to slow blink');
    expect(sim.requests.control).toBe(before);
  });

  it('answers an MQTT start on a busy chair with an error and no control call', async () => {
    const sub = await Subscriber.connect(broker.url, `${B}/chairs/+/start/response`);
    const before = sim.requests.control;
    await sub.client.publishAsync(`${B}/chairs/MC7001/start`, JSON.stringify({ transaction: 'busy-1' }), { qos: 1 });
    const answer = await sub.waitFor((m) => m.text.includes('busy-1'), 'the answer');
    expect(answer.topic).toBe(`${B}/chairs/MC7001/start/response`);
    expect(JSON.parse(answer.text)).toEqual({ status: 'error', error: 'chair_busy', transaction: 'busy-1' });
    expect(answer.retain).toBe(false);
    expect(sim.requests.control).toBe(before);
    await sub.close();
  });

  it('starts an idle chair from MQTT 5 and answers on the response topic with the correlation data', async () => {
    const client = await mqtt.connectAsync(broker.url, { protocolVersion: 5 });
    const answers: { topic: string; text: string; correlation?: string }[] = [];
    client.on('message', (topic, payload, packet) => {
      answers.push({ topic, text: payload.toString(), correlation: packet.properties?.correlationData?.toString() });
    });
    await client.subscribeAsync(['replies/pos-1', `${B}/chairs/MC7002/start/response`], { qos: 1 });
    await client.publishAsync(`${B}/chairs/MC7002/start`, JSON.stringify({ minutes: 3, transaction: 'pos-42' }), {
      qos: 1,
      properties: { responseTopic: 'replies/pos-1', correlationData: Buffer.from('corr-xyz') },
    });
    await waitFor(() => answers.length >= 2, 'both answers');
    const reply = answers.find((a) => a.topic === 'replies/pos-1');
    expect(reply).toEqual({ topic: 'replies/pos-1', text: '{"status":"ok","transaction":"pos-42"}', correlation: 'corr-xyz' });
    expect(answers.find((a) => a.topic.endsWith('/start/response'))?.text).toBe('{"status":"ok","transaction":"pos-42"}');
    expect(sim.model.transactions.at(-1)?.record).toMatchObject({ DeviceId: 'MC7002', PlayTime: '3' });
    await client.endAsync();
  });

  it('answers bad start commands with an error and keeps going', async () => {
    const sub = await Subscriber.connect(broker.url, `${B}/chairs/+/start/response`);
    const before = sim.requests.control;
    for (const payload of ['not json', '{"minutes":999,"transaction":"too-long"}', '{"minutes":-1}', '[]']) {
      const mark = sub.mark();
      await sub.client.publishAsync(`${B}/chairs/MC7003/start`, payload, { qos: 1 });
      const answer = await sub.waitFor(() => true, `an answer to ${payload}`, mark);
      expect(JSON.parse(answer.text).status).toBe('error');
    }
    const last = await sub.client.publishAsync(`${B}/chairs/UNKNOWN/start`, '{}', { qos: 1 }).then(() =>
      sub.waitFor((m) => m.topic.includes('UNKNOWN'), 'the unknown chair answer'),
    );
    expect(JSON.parse(last.text)).toEqual({ status: 'error', error: 'unknown_chair' });
    expect(sub.messages.map((m) => JSON.parse(m.text).error)).toEqual(['invalid_payload', 'invalid_minutes', 'invalid_minutes', 'invalid_payload', 'unknown_chair']);
    expect(JSON.parse(sub.messages[1]!.text).transaction).toBe('too-long');
    expect(sim.requests.control).toBe(before);
    await sub.close();
  });

  it('never acts on a retained start command, which would start the chair at every reconnect', async () => {
    const client = await mqtt.connectAsync(broker.url);
    await client.publishAsync('chair-agent/retained/chairs/MC7003/start', '{"transaction":"stale"}', { qos: 1, retain: true });
    const { logger, lines } = memoryLogger('info');
    const late = build(testConfig({ vendorUrl: sim.url, brokerUrl: broker.url }, { site: { id: 'retained' } }), { logger });
    const before = sim.requests.control;
    await late.start();
    await waitFor(() => lines.find((l) => l.msg === 'start command refused; no chair was started' && l['error'] === 'retained_command'), 'the retained command refused');
    expect(sim.requests.control).toBe(before);
    // ...and cleared from the broker, so it is not replayed at the next reconnect.
    await waitFor(async () => (await retainedOn(broker.url, 'chair-agent/retained/chairs/MC7003/start')) === null, 'no retained start command left');
    await late.stop();
    await client.endAsync();
  });

  it('gives the failure flashes for a press while the vendor is down', async () => {
    await waitFor(() => agent.leds.shown('chair:MC7003') === 'on', 'MC7003 steady');
    sim.faults.add({ mode: 'reset', endpoints: ['control', 'status'] });
    const before = sim.requests.control;
    await press(24);
    await waitFor(() => agent.leds.shown('chair:MC7003') === 'flash', 'failure flashes');
    expect(sim.requests.control).toBe(before + 1);
    sim.faults.clear();
    await waitFor(() => agent.leds.shown('chair:MC7003') === 'on', 'back to steady');
  });

  it('shows the agent health on the status LED', async () => {
    expect(agent.leds.shown('status')).toBe('on');
    await sim.stop();
    try {
      await waitFor(() => agent.leds.shown('status') === 'fast', 'fast blink without the vendor');
      await waitFor(() => agent.leds.shown('chair:MC7003') === 'off', 'chair LEDs off once the list is stale');
    } finally {
      await sim.start();
    }
    await waitFor(() => agent.leds.shown('status') === 'on', 'steady again');
  });

  it('answers 404 for a press on a line that is not a button', async () => {
    expect((await press(27)).status).toBe(404);
    expect((await press(9)).status).toBe(404);
  });
});
