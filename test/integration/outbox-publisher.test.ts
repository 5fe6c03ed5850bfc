import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { systemClock } from '../../agent/platform/clock.js';
import { OutboxPublisher } from '../../agent/delivery/outbox-publisher.js';
import { silentLogger } from '../../agent/platform/logger.js';
import { Metrics } from '../../agent/observe/metrics.js';
import { MqttBroker } from '../../agent/mqtt/mqtt-broker.js';
import { Topics } from '../../agent/mqtt/topics.js';
import { Outbox } from '../../agent/store/outbox.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { asRecord, vendorRecord, storeAll } from '../helpers/records.js';
import { Subscriber, type Received } from '../helpers/subscriber.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { waitFor } from '../helpers/wait.js';
import { describeWith } from '../helpers/tools.js';

let broker: TestBroker;
beforeAll(async () => {
  broker = await startBroker();
});
afterAll(() => broker.stop());

interface Rig {
  outbox: Outbox;
  mqtt: MqttBroker;
  publisher: OutboxPublisher;
  dbPath: string;
  stop(): Promise<void>;
}

function rig(site: string, url: string, dbPath = join(mkdtempSync(join(tmpdir(), 'pub-')), 'agent.db'), maxInflight = 100, keepaliveSeconds = 30): Rig {
  const topics = new Topics('chair-agent', site);
  const outbox = new Outbox({ path: dbPath });
  outbox.open();
  const mqtt = new MqttBroker({
    url,
    clientId: `pub-${site}-${Math.random().toString(16).slice(2)}`,
    rejectUnauthorized: true,
    protocolVersion: 5,
    keepaliveSeconds,
    reconnectSeconds: 0.1,
    will: { topic: topics.bridgeState, payload: '{"state":"offline"}' },
    clock: systemClock,
    logger: silentLogger(),
  });
  const publisher = new OutboxPublisher({
    outbox,
    broker: mqtt,
    topics,
    clock: systemClock,
    logger: silentLogger(),
    metrics: new Metrics({ defaultMetrics: false }),
    siteId: site,
    timeZone: 'Asia/Bangkok',
    maxInflight,
  });
  mqtt.connect();
  publisher.start();
  return {
    outbox,
    mqtt,
    publisher,
    dbPath,
    async stop() {
      await publisher.stop();
      await mqtt.end(1000);
      outbox.close();
    },
  };
}

const tx = (m: Received): Record<string, unknown> => JSON.parse(m.text) as Record<string, unknown>;

describeWith('mosquitto', 'outbox publisher', () => {
  it('delivers every record in the order it was stored, QoS 1, and marks it delivered', async () => {
    const sub = await Subscriber.connect(broker.url, 'chair-agent/order/transactions/+');
    const r = rig('order', broker.url);
    const records = Array.from({ length: 300 }, (_, i) => vendorRecord({ DeviceId: `MC700${i % 3}` }));
    for (let i = 0; i < records.length; i += 50) await storeAll(r.outbox, records.slice(i, i + 50).map(asRecord), 'poll', Date.now());
    await waitFor(() => sub.messages.length >= 300, '300 transactions');
    const seqs = sub.messages.map((m) => (tx(m)['agent'] as { seq: number }).seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(sub.messages.map((m) => tx(m)['TransactionId'])).toEqual(records.map((x) => x['TransactionId']));
    await waitFor(() => r.outbox.stats().pending === 0, 'every record marked delivered');
    expect(r.outbox.stats().delivered).toBe(300);
    await r.stop();
    await sub.close();
  });

  it('publishes the vendor fields verbatim plus an agent object, on the chair topic', async () => {
    const sub = await Subscriber.connect(broker.url, 'chair-agent/shape/transactions/#');
    const r = rig('shape', broker.url);
    const fields = vendorRecord({ DeviceId: 'MC7009', Label: null, Amount: '40.00', Extra: { nested: [1, 2] } });
    await storeAll(r.outbox, [asRecord(fields)], 'webhook', Date.UTC(2026, 10, 22, 7, 0, 0));
    const m = await sub.waitFor(() => true, 'the transaction');
    expect(m.topic).toBe('chair-agent/shape/transactions/MC7009');
    const { agent, ...vendor } = tx(m);
    expect(vendor).toEqual(fields);
    expect(agent).toEqual({ site: 'shape', source: 'webhook', receivedAt: '2026-11-22T14:00:00+07:00', seq: 1 });
    await r.stop();
    await sub.close();
  });

  it('holds records while the broker is away and delivers them, in order, when it returns', async () => {
    const proxy = new TcpProxy(broker.port);
    await proxy.start();
    const sub = await Subscriber.connect(broker.url, 'chair-agent/outage/transactions/+');
    const r = rig('outage', proxy.url);
    await waitFor(() => r.mqtt.connected, 'connected');
    proxy.up = false;
    proxy.cutAll();
    await waitFor(() => !r.mqtt.connected, 'disconnected');
    const records = Array.from({ length: 50 }, () => vendorRecord());
    await storeAll(r.outbox, records.map(asRecord), 'poll', Date.now());
    expect(r.outbox.stats().pending).toBe(50);
    proxy.up = true;
    await waitFor(() => sub.messages.length >= 50, 'the held records');
    expect(sub.messages.map((m) => tx(m)['TransactionId'])).toEqual(records.map((x) => x['TransactionId']));
    await waitFor(() => r.outbox.stats().pending === 0, 'all delivered');
    await r.stop();
    await sub.close();
    await proxy.stop();
  });

  it('sends a record again after the broker is killed between its PUBLISH and PUBACK', async () => {
    const proxy = new TcpProxy(broker.port);
    await proxy.start();
    const r = rig('puback', proxy.url);
    await waitFor(() => r.mqtt.connected, 'connected');
    const first = await Subscriber.connect(broker.url, 'chair-agent/puback/transactions/+');

    proxy.swallowReplies = true; // the broker's PUBACK never reaches the agent
    const rec = vendorRecord();
    await storeAll(r.outbox, [asRecord(rec)], 'webhook', Date.now());
    await first.waitFor((m) => tx(m)['TransactionId'] === rec['TransactionId'], 'the first PUBLISH at the broker');
    expect(r.outbox.stats().pending).toBe(1);
    expect(r.publisher.inFlight).toBe(1);
    await first.close();

    proxy.up = false;
    await broker.kill();
    proxy.cutAll();
    await broker.restart();
    const after = await Subscriber.connect(broker.url, 'chair-agent/puback/transactions/+');
    proxy.swallowReplies = false;
    proxy.up = true;

    const again = await after.waitFor((m) => tx(m)['TransactionId'] === rec['TransactionId'], 'the record sent again');
    expect(tx(again)['Status']).toBe(rec['Status']);
    await waitFor(() => r.outbox.stats().pending === 0, 'delivered once acknowledged');
    await r.stop();
    await after.close();
    await proxy.stop();
  });

  it('notices a broker that stops answering (a half-open link) by its keepalive, and delivers what waited once it answers', async () => {
    const proxy = new TcpProxy(broker.port);
    await proxy.start();
    const sub = await Subscriber.connect(broker.url, 'chair-agent/silent/transactions/+');
    const r = rig('silent', proxy.url, undefined, 100, 5);
    await waitFor(() => r.mqtt.connected, 'connected');

    proxy.swallowReplies = true; // no PUBACK, no PINGRESP: the link looks up but nothing comes back
    const records = Array.from({ length: 10 }, () => vendorRecord());
    await storeAll(r.outbox, records.map(asRecord), 'webhook', Date.now());
    await waitFor(() => sub.messages.length >= 10, 'the records at the broker');
    expect(r.outbox.stats().pending).toBe(10);
    // A PINGREQ after one keepalive period (5 s), given up half a period later.
    await waitFor(() => !r.mqtt.connected, 'the dead link noticed', 15_000);

    proxy.swallowReplies = false;
    await waitFor(() => r.outbox.stats().pending === 0, 'every record acknowledged after the reconnect');
    const ids = new Set(sub.messages.map((m) => tx(m)['TransactionId']));
    expect(records.every((x) => ids.has(x['TransactionId']))).toBe(true);
    await r.stop();
    await sub.close();
    await proxy.stop();
  });

  it('resumes with the unacknowledged records after a restart', async () => {
    const proxy = new TcpProxy(broker.port);
    await proxy.start();
    proxy.up = false;
    const first = rig('restart', proxy.url);
    await storeAll(first.outbox, Array.from({ length: 20 }, () => asRecord(vendorRecord())), 'poll', Date.now());
    await first.stop();

    const sub = await Subscriber.connect(broker.url, 'chair-agent/restart/transactions/+');
    proxy.up = true;
    const second = rig('restart', proxy.url, first.dbPath);
    await waitFor(() => sub.messages.length >= 20, 'the 20 records after the restart');
    await waitFor(() => second.outbox.stats().pending === 0, 'all delivered');
    await second.stop();
    await sub.close();
    await proxy.stop();
  });

  it('keeps no more records in flight than its window', async () => {
    const proxy = new TcpProxy(broker.port);
    await proxy.start();
    const r = rig('window', proxy.url, undefined, 7);
    await waitFor(() => r.mqtt.connected, 'connected');
    proxy.swallowReplies = true;
    await storeAll(r.outbox, Array.from({ length: 30 }, () => asRecord(vendorRecord())), 'poll', Date.now());
    await waitFor(() => r.publisher.inFlight === 7, 'a full window');
    expect(r.outbox.stats().pending).toBe(30);
    proxy.swallowReplies = false;
    proxy.cutAll(); // the lost PUBACKs: the publisher sends those records again after the reconnect
    await waitFor(() => r.outbox.stats().pending === 0, 'all delivered');
    await r.stop();
    await proxy.stop();
  });
});
