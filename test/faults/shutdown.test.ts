import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Simulator } from '../../agent/simulator/simulator.js';
import { AgentProcess } from '../helpers/agent-process.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { waitFor } from '../helpers/wait.js';
import { describeWith } from '../helpers/tools.js';

let broker: TestBroker;
let proxy: TcpProxy;
let sim: Simulator;

beforeAll(async () => {
  broker = await startBroker();
  proxy = new TcpProxy(broker.port);
  await proxy.start();
  sim = new Simulator({ apiKey: 'stop-key' });
  await sim.start();
});

afterAll(async () => {
  await sim.close();
  await proxy.stop();
  await broker.stop();
});

describeWith('mosquitto', 'stopping under bad conditions', () => {
  it('exits 0 within 10 s of SIGTERM with a start hanging at the vendor and a broker that acknowledges nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stop-'));
    const config = join(dir, 'config.yaml');
    writeFileSync(
      config,
      `site: {id: stop}
vendor: {baseUrl: "${sim.url}", apiKey: stop-key, pollSeconds: 0.5, requestTimeoutSeconds: 30}
webhook: {channelSecret: stop-secret}
http: {host: 127.0.0.1, port: 0}
mqtt: {url: "${proxy.url}"}
storage: {path: ${join(dir, 'agent.db')}}
gpio: {driver: sim, chairs: [{deviceId: MC7001, button: 17, led: 27}]}
`,
    );
    const agent = AgentProcess.start(['run', '--config', config]);
    const port = await agent.httpPort();
    await agent.waitForLog((l) => l.msg === 'vendor API reachable', 'the first poll');
    await agent.waitForLog((l) => l.msg === 'connected to the broker', 'the broker connection');
    sim.faults.add({ mode: 'timeout', delayMs: 60_000, endpoints: ['control'] });
    proxy.swallowReplies = true;
    expect((await fetch(`http://127.0.0.1:${port}/sim/gpio/17/press`, { method: 'POST' })).status).toBe(200);
    await waitFor(() => sim.requests.control === 1, 'the control call to hang at the vendor');
    // Past 10 s the agent gives up on a clean stop and exits 1: 0 means it stopped in time.
    expect(await agent.signal('SIGTERM')).toBe(0);
    expect(agent.lines.some((l) => l.msg === 'waiting for starts under way')).toBe(true);
    expect(agent.lines.find((l) => l.msg === 'chair start failed')?.['error']).toBe('stopping');
    expect(agent.lines.at(-1)?.msg).toBe('stopped');
  });
});
