import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Agent } from '../../agent/build.js';
import { signBody } from '../../agent/http/sign.js';
import type { TestBroker } from '../helpers/broker.js';
import { TEST_SECRET } from '../helpers/config.js';
import { startRig, type Rig } from '../helpers/rig.js';
import { vendorRecord } from '../helpers/records.js';
import { Subscriber } from '../helpers/subscriber.js';
import { waitFor } from '../helpers/wait.js';
import { describeWith } from '../helpers/tools.js';

let rig: Rig;
let agent: Agent;
let broker: TestBroker;
let base: string;

beforeAll(async () => {
  rig = await startRig({
    site: 'bfaults',
    chairs: 1,
    sections: { http: { headersTimeoutSeconds: 0.5, requestTimeoutSeconds: 1 }, gpio: { driver: 'sim', statusLed: 5 } },
  });
  ({ agent, broker, base } = rig);
  await waitFor(() => agent.broker.connected && agent.health.get('vendor').ok, 'the agent settled');
});

afterAll(() => rig.close());

async function webhook(rec: Record<string, unknown>): Promise<number> {
  const body = JSON.stringify(rec);
  const res = await fetch(`${base}/vendor/webhook`, { method: 'POST', headers: { 'x-vendor-signature': signBody(body, TEST_SECRET) }, body });
  return res.status;
}

describeWith('mosquitto', 'the broker killed and restarted', () => {
  it('buffers while it is gone, says so, and delivers everything when it is back', async () => {
    const mark = rig.lines.length;
    await broker.kill();
    await waitFor(() => !agent.health.get('broker').ok, 'the broker check to fail');
    await waitFor(() => agent.leds.shown('status') === 'slow', 'the status LED on slow blink (buffering)');
    expect(rig.lines.slice(mark).some((l) => l.component === 'bridge' && l.msg === 'broker connection lost; buffering')).toBe(true);
    const records = Array.from({ length: 25 }, () => vendorRecord());
    for (const r of records) expect(await webhook(r)).toBe(200);
    expect(agent.outbox.stats().pending).toBe(25);
    const res = await fetch(`${base}/healthz`);
    expect(res.status).toBe(503);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toContain('chair_agent_outbox_pending 25');
    expect(metrics).toContain('chair_agent_broker_connected 0');
    expect(metrics).toMatch(/chair_agent_outbox_oldest_pending_age_seconds \d/);

    await broker.restart();
    const sub = await Subscriber.connect(broker.url, ['chair-agent/bfaults/transactions/+', 'chair-agent/bfaults/bridge/info']);
    await waitFor(() => agent.outbox.stats().pending === 0 && agent.broker.connected, 'the backlog delivered');
    // Delivered before the subscriber may have joined: every record is in the delivered count.
    expect(agent.outbox.stats().delivered).toBeGreaterThanOrEqual(25);
    // bridge/info is refreshed once the backlog has moved.
    const info = await sub.waitFor((m) => m.topic.endsWith('/bridge/info') && JSON.parse(m.text).backlog.pending === 0, 'bridge/info with the backlog drained');
    expect(JSON.parse(info.text).backlog.delivered).toBe(25);
    await waitFor(() => agent.leds.shown('status') === 'on', 'the status LED steady again');
    const after = vendorRecord();
    expect(await webhook(after)).toBe(200);
    await sub.waitFor((m) => m.text.includes(String(after['TransactionId'])) && m.topic.includes('/transactions/'), 'a new record straight through');
    await sub.close();
  });
});

describeWith('mosquitto', 'slow webhook clients', () => {
  it('cannot hold the listener: they are dropped while others are served', async () => {
    const slow: Socket[] = [];
    for (let i = 0; i < 20; i++) {
      const s = connect(agent.http.address().port, '127.0.0.1');
      s.on('error', () => undefined);
      s.resume();
      await new Promise<void>((r) => s.once('connect', () => r()));
      s.write('POST /vendor/webhook HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n');
      slow.push(s);
    }
    const closed = slow.map((s) => new Promise<void>((r) => s.once('close', () => r())));
    for (let i = 0; i < 5; i++) expect(await webhook(vendorRecord())).toBe(200);
    await Promise.all(closed);
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
  });
});
