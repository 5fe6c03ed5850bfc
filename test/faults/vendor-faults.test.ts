import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import type { Agent } from '../../agent/build.js';
import type { Fault } from '../../agent/simulator/sim-faults.js';
import type { Simulator } from '../../agent/simulator/simulator.js';
import type { LogRecord } from '../helpers/memory-logger.js';
import { startRig, type Rig } from '../helpers/rig.js';
import { Subscriber } from '../helpers/subscriber.js';
import { waitFor } from '../helpers/wait.js';
import { describeWith } from '../helpers/tools.js';

let rig: Rig;
let sim: Simulator;
let agent: Agent;
let lines: LogRecord[];
let health: string;

beforeAll(async () => {
  rig = await startRig({
    site: 'vfaults',
    sections: {
      vendor: { pollSeconds: 0.3, requestTimeoutSeconds: 0.8, retries: 1 },
      transactions: { syncSchedule: '0 0 1 1 *' }, // the tests run syncs themselves
      gpio: { driver: 'sim', statusLed: 5, chairs: [{ deviceId: 'MC7001', button: 17, led: 27 }, { deviceId: 'MC7002', button: 22, led: 23 }] },
      start: { confirmIntervalSeconds: 0.1, confirmTimeoutSeconds: 2 },
    },
  });
  ({ sim, agent, lines } = rig);
  health = `${rig.base}/healthz`;
  await waitFor(() => agent.leds.shown('chair:MC7001') === 'on' && agent.leds.shown('status') === 'on', 'the agent settled');
});

afterAll(() => rig.close());

afterEach(async () => {
  sim.faults.clear();
  await waitFor(() => agent.health.get('vendor').ok && agent.registry.view('MC7001')?.online, 'recovery');
});

const logged = (pred: (l: LogRecord) => boolean, since: number): LogRecord | undefined => lines.slice(since).find(pred);

const modes: [string, Fault, RegExp][] = [
  ['a timeout', { mode: 'timeout', delayMs: 5_000 }, /did not answer (lists|transactions) within 800 ms/],
  ['a 5xx', { mode: 'error', status: 503 }, /HTTP 503/],
  ['a malformed body', { mode: 'malformed' }, /not JSON/],
  ['an error envelope', { mode: 'bad-envelope' }, /status is "error"/],
  ['a connection reset', { mode: 'reset' }, /vendor unreachable .*(ECONNRESET|UND_ERR_SOCKET)/],
  ['a rate limit', { mode: 'rate-limit', retryAfterSeconds: 1 }, /HTTP 429/],
];

describeWith('mosquitto', 'vendor faults during polling', () => {
  it.each(modes)('%s: keeps running, says what is wrong in health, logs and LEDs, and recovers', async (_what, fault, why) => {
    const mark = lines.length;
    sim.faults.add({ ...fault, endpoints: ['lists'] });
    await waitFor(() => !agent.health.get('vendor').ok, 'the vendor check to fail');
    expect(agent.health.get('vendor').detail).toMatch(why);
    const res = await fetch(health);
    expect(res.status).toBe(503);
    expect(((await res.json()) as { checks: { vendor: { detail: string } } }).checks.vendor.detail).toMatch(why);
    expect(logged((l) => l.component === 'poller' && l.msg === 'chair list poll failed', mark)?.['err']).toMatch(why);
    await waitFor(() => agent.leds.shown('status') === 'fast', 'the status LED on fast blink');
    await waitFor(() => agent.leds.shown('chair:MC7001') === 'off', 'the chair LED off once the list is stale');
    sim.faults.clear();
    await waitFor(() => agent.health.get('vendor').ok && agent.leds.shown('chair:MC7001') === 'on' && agent.leds.shown('status') === 'on', 'recovery');
    expect((await fetch(health)).status).toBe(200);
  });
});

describeWith('mosquitto', 'vendor faults during the transaction sync', () => {
  it.each(modes.filter(([w]) => w !== 'a rate limit'))('%s: the sync fails, says why, keeps its cursor, and the next run loses nothing', async (_what, fault, why) => {
    const sub = await Subscriber.connect(rig.broker.url, 'chair-agent/vfaults/transactions/+');
    const before = sim.model.transactions.length;
    sim.model.backfill(30, 10 * 60_000);
    const expected = sim.model.transactions.slice(before).map((t) => String(t.record['TransactionId']));
    const mark = lines.length;
    sim.faults.add({ ...fault, endpoints: ['transactions'], after: 1 });
    await expect(agent.sync.run()).rejects.toThrow(why);
    expect(logged((l) => l.component === 'sync' && l.msg.startsWith('transaction sync failed'), mark)?.['err']).toMatch(why);
    sim.faults.clear();
    await agent.sync.run();
    await waitFor(() => expected.every((id) => sub.messages.some((m) => m.text.includes(id))), 'every record delivered');
    await sub.close();
  });
});

describeWith('mosquitto', 'vendor faults on the control call', () => {
  it.each([
    ['a 5xx after which the chair did not start', { mode: 'error', status: 502 } as Fault, 'vendor_unreachable'],
    ['a timeout after which the chair did not start', { mode: 'timeout', delayMs: 5_000 } as Fault, 'vendor_timeout'],
    ['a reset', { mode: 'reset' } as Fault, 'vendor_unreachable'],
    ['a malformed answer', { mode: 'malformed' } as Fault, 'vendor_refused'],
  ])('%s: the start fails with failure flashes and one control call', async (_what, fault, error) => {
    const before = sim.requests.control;
    sim.faults.add({ ...fault, endpoints: ['control'], count: 1 });
    const outcome = await agent.starts.startChair('MC7002', { source: 'mqtt' });
    expect(outcome).toMatchObject({ ok: false, error });
    expect(sim.requests.control).toBe(before + 1);
    expect(agent.leds.shown('chair:MC7002')).toBe('flash');
  });

  it('a lost answer after which the chair did start: the status tells, and the start is reported ok', async () => {
    sim.faults.add({ mode: 'timeout', delayMs: 5_000, endpoints: ['control'], count: 1, commit: true });
    const outcome = await agent.starts.startChair('MC7002', { source: 'mqtt' });
    expect(outcome).toMatchObject({ ok: true });
    expect(sim.model.isRunning(sim.model.chairs.get('MC7002')!)).toBe(true);
    sim.model.chairs.get('MC7002')!.sessionEndsAt = null;
    await waitFor(() => agent.registry.view('MC7002')?.state?.startable, 'MC7002 idle again');
  });
});
