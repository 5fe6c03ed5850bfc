import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { build, type Agent } from '../../agent/build.js';
import { silentLogger } from '../../agent/platform/logger.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { track } from '../helpers/agent-process.js';
import { MAIN } from '../helpers/cli.js';
import { TEST_API_KEY, TEST_SECRET, testConfig } from '../helpers/config.js';
import { Subscriber } from '../helpers/subscriber.js';
import { waitFor } from '../helpers/wait.js';
import { describeWith } from '../helpers/tools.js';

let broker: TestBroker;
let sim: Simulator;

beforeAll(async () => {
  broker = await startBroker();
  sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 3 });
  await sim.start();
});

afterAll(async () => {
  await sim.close();
  await broker.stop();
});

function agentFor(siteId: string): Agent {
  return build(testConfig({ vendorUrl: sim.url, brokerUrl: broker.url }, { site: { id: siteId } }), { logger: silentLogger() });
}

const B = (site: string): string => `chair-agent/${site}`;

describeWith('mosquitto', 'MQTT bridge against a real broker', () => {
  it('leaves retained bridge state, chair states and availability for a subscriber that comes late', async () => {
    const agent = agentFor('late');
    const early = await Subscriber.connect(broker.url, `${B('late')}/#`);
    await agent.start();
    await early.waitFor((m) => m.topic === `${B('late')}/chairs/MC7003/availability` && m.text === '{"state":"online"}', 'availability');
    await early.close();

    const late = await Subscriber.connect(broker.url, `${B('late')}/#`);
    const state = await late.waitFor((m) => m.topic === `${B('late')}/bridge/state`, 'bridge state');
    expect(JSON.parse(state.text)).toEqual({ state: 'online' });
    expect(state.retain).toBe(true);
    for (const id of ['MC7001', 'MC7002', 'MC7003']) {
      const chair = await late.waitFor((m) => m.topic === `${B('late')}/chairs/${id}`, id);
      expect(JSON.parse(chair.text)).toMatchObject({
        deviceId: id,
        status: 'Available',
        running: false,
        seated: false,
        remainingSeconds: null,
        firmwareVersion: '01.04.12',
      });
      expect(JSON.parse(chair.text).serverTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+07:00$/);
      const avail = await late.waitFor((m) => m.topic === `${B('late')}/chairs/${id}/availability`, `${id} availability`);
      expect(avail.text).toBe('{"state":"online"}');
    }
    const info = await late.waitFor((m) => m.topic === `${B('late')}/bridge/info`, 'bridge info');
    expect(JSON.parse(info.text)).toMatchObject({
      siteId: 'late',
      runtime: { node: process.versions.node, arch: process.arch },
      broker: { connected: true },
      vendor: { baseUrl: sim.url },
      backlog: { pending: 0, oldestPendingAt: null, delivered: 0, lastDeliveryAt: null },
    });
    await late.close();
    await agent.stop();
  });

  it('publishes a chair when it changes, not on every poll', async () => {
    const agent = agentFor('changes');
    const sub = await Subscriber.connect(broker.url, `${B('changes')}/chairs/MC7002`);
    await agent.start();
    await sub.waitFor((m) => JSON.parse(m.text).status === 'Available', 'idle state');
    const idle = sub.mark();
    const polls = sim.requests.lists;
    await waitFor(() => sim.requests.lists >= polls + 5, 'five more polls');
    expect(sub.messages.slice(idle)).toEqual([]);

    sim.model.start('MC7002', 5, 'manual');
    const running = await sub.waitFor((m) => JSON.parse(m.text).running === true, 'running state', idle);
    expect(JSON.parse(running.text)).toMatchObject({ status: 'Running', seated: true, startable: false });
    const stopped = sub.mark();
    sim.model.chairs.get('MC7002')!.sessionEndsAt = null;
    await sub.waitFor((m) => JSON.parse(m.text).running === false, 'idle again', stopped);
    await sub.close();
    await agent.stop();
  });

  it('turns availability offline when the vendor goes away and online when it returns', async () => {
    const agent = agentFor('uplink');
    const sub = await Subscriber.connect(broker.url, `${B('uplink')}/chairs/+/availability`);
    await agent.start();
    await sub.waitFor((m) => m.topic.includes('MC7001') && m.text.includes('online'), 'online');
    const beforeStop = sub.mark();
    await sim.stop();
    await sub.waitFor((m) => m.topic.includes('MC7001') && m.text.includes('offline'), 'offline after the vendor stopped', beforeStop);
    expect(agent.health.get('vendor').ok).toBe(false);
    const beforeReturn = sub.mark();
    await sim.start();
    await sub.waitFor((m) => m.topic.includes('MC7001') && m.text.includes('online'), 'online after the vendor returned', beforeReturn);
    await sub.close();
    await agent.stop();
  });

  it('turns a chair that vanished from the list offline', async () => {
    const agent = agentFor('vanish');
    const sub = await Subscriber.connect(broker.url, `${B('vanish')}/chairs/MC7003/availability`);
    await agent.start();
    await sub.waitFor((m) => m.text.includes('online'), 'online');
    const before = sub.mark();
    sim.model.chairs.get('MC7003')!.hidden = true;
    try {
      await sub.waitFor((m) => m.text.includes('offline'), 'offline once gone from the list', before);
      expect(agent.registry.view('MC7001')?.online).toBe(true);
    } finally {
      sim.model.chairs.get('MC7003')!.hidden = false;
    }
    await sub.close();
    await agent.stop();
  });

  it('republishes everything retained after the broker restarts', async () => {
    const agent = agentFor('reconnect');
    await agent.start();
    const first = await Subscriber.connect(broker.url, `${B('reconnect')}/chairs/MC7001/availability`);
    await first.waitFor((m) => m.text.includes('online'), 'online');
    await first.close();
    await broker.kill(); // an in-memory broker forgets every retained message
    await broker.restart();
    const after = await Subscriber.connect(broker.url, `${B('reconnect')}/#`);
    await after.waitFor((m) => m.topic === `${B('reconnect')}/bridge/state` && m.text.includes('online'), 'bridge state again');
    await after.waitFor((m) => m.topic === `${B('reconnect')}/chairs/MC7001`, 'chair state again');
    await after.waitFor((m) => m.topic === `${B('reconnect')}/chairs/MC7001/availability`, 'availability again');
    await after.close();
    await agent.stop();
  });

  it('publishes offline on a clean stop', async () => {
    const agent = agentFor('clean');
    await agent.start();
    const sub = await Subscriber.connect(broker.url, `${B('clean')}/bridge/state`);
    await sub.waitFor((m) => m.text.includes('online'), 'online');
    const before = sub.mark();
    await agent.stop();
    await sub.waitFor((m) => m.text.includes('offline'), 'offline', before);
    await sub.close();
    const late = await Subscriber.connect(broker.url, `${B('clean')}/bridge/state`);
    expect((await late.waitFor(() => true, 'retained state')).text).toBe('{"state":"offline"}');
    await late.close();
  });

  it('leaves its will, offline, when the agent process is killed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'will-'));
    const configPath = join(dir, 'config.yaml');
    writeFileSync(
      configPath,
      `site: {id: will}
vendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}, pollSeconds: 0.5}
webhook: {channelSecret: ${TEST_SECRET}}
http: {host: 127.0.0.1, port: 0}
mqtt: {url: "${broker.url}"}
storage: {path: ${join(dir, 'agent.db')}}
gpio: {driver: sim}
`,
    );
    const sub = await Subscriber.connect(broker.url, `${B('will')}/bridge/state`);
    const child = track(spawn(process.execPath, [MAIN, 'run', '--config', configPath], { stdio: 'ignore' }));
    await sub.waitFor((m) => m.text.includes('online'), 'online from the agent process');
    const exited = new Promise((resolve) => child.once('exit', resolve));
    const before = sub.mark();
    child.kill('SIGKILL');
    await exited;
    const will = await sub.waitFor((m) => m.text.includes('offline'), 'the will', before);
    expect(will.text).toBe('{"state":"offline"}');
    await sub.close();
  });
});
