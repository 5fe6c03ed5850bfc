import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import mqtt from 'mqtt';
import type { Agent } from '../../agent/build.js';
import type { TestBroker } from '../helpers/broker.js';
import { startRig, type Rig } from '../helpers/rig.js';
import { vendorRecord } from '../helpers/records.js';
import { Subscriber } from '../helpers/subscriber.js';
import { waitFor } from '../helpers/wait.js';
import { describeWith } from '../helpers/tools.js';
import { webhookStatus } from '../helpers/webhook.js';

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

const webhook = (rec: Record<string, unknown>): Promise<number> => webhookStatus(base, rec);

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

describeWith('mosquitto', 'another client with the agent\'s client id', () => {
  it('stops taking the session back at once, says what to look for, and reconnects once the other is gone', async () => {
    // A second box configured as this site, or an old one still running: the broker ends one
    // session whenever the other connects. Both reconnecting at once, they took it from each
    // other about 18 times a second, neither connected, each logging every loss.
    const twin = await startRig({ site: 'twin', chairs: 1 });
    const other = await mqtt.connectAsync(twin.broker.url, { clientId: 'chair-agent-twin', protocolVersion: 5, reconnectPeriod: 100 });
    try {
      const warned = await waitFor(
        () => twin.lines.find((l) => l.msg === 'another client connected with this client id and took the session over' || l.msg === 'the broker keeps closing the connection as soon as it accepts it'),
        'the agent saying why it lost the broker',
        30_000,
      );
      expect(warned).toMatchObject({ clientId: 'chair-agent-twin', fix: expect.stringContaining('mqtt.clientId') });
      expect(Number(warned['retryInSeconds'])).toBeGreaterThanOrEqual(2);
      // Mosquitto 2.1 tells the agent (DISCONNECT 0x8E) and it waits at the first takeover; 2.0
      // only closes the socket, and it waits after ten connections taken away at once.
      expect(twin.lines.filter((l) => l.msg === 'connected to the broker').length).toBeLessThanOrEqual(12);
      // Once the other is gone the agent reconnects by itself, and what it stored is delivered.
      await other.endAsync(true);
      const sub = await Subscriber.connect(twin.broker.url, 'chair-agent/twin/transactions/+');
      const rec = vendorRecord();
      expect(await webhookStatus(twin.base, rec)).toBe(200);
      await sub.waitFor((m) => m.text.includes(String(rec['TransactionId'])), 'the record delivered after the reconnect', 0, 120_000);
      await sub.close();
    } finally {
      await other.endAsync(true).catch(() => undefined);
      await twin.close();
    }
  }, 180_000);
});
