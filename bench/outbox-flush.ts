import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import mqtt from 'mqtt';
import { systemClock } from '../agent/clock.js';
import { OutboxPublisher, transactionPayload } from '../agent/components/outbox-publisher.js';
import { silentLogger } from '../agent/logger.js';
import { Metrics } from '../agent/metrics.js';
import { MqttBroker } from '../agent/mqtt/mqtt-broker.js';
import { Topics } from '../agent/mqtt/topics.js';
import { Outbox } from '../agent/store/outbox.js';
import type { TransactionRecord } from '../agent/vendor/vendor-api.js';
import { startBroker, type TestBroker } from './lib/broker.js';
import { vendorFields } from './lib/records.js';
import { median, round } from './lib/stats.js';

export interface FlushResult {
  records: number;
  broker: string;
  tcpNoDelay: boolean;
  window: number;
  bareMs: number[];
  agentMs: number[];
  /** Agent throughput over the bare loop's (medians): 1.0 means as fast. */
  ratio: number;
}

function records(n: number, run: number): TransactionRecord[] {
  return Array.from({ length: n }, (_, i) => {
    const fields = vendorFields(`B${run}-${i}`, i, { Status: 'finished', Label: 'Massage Chair 1', DeviceId: `MC70${String(i % 16).padStart(2, '0')}` });
    return { fields, transactionId: fields['TransactionId'] as string, status: 'finished', deviceId: fields['DeviceId'] as string, transactionTime: '2026-11-22 14:00:00' };
  });
}

/** The baseline: one mqtt.js client publishing the same messages at QoS 1, all at once. */
async function bareLoop(broker: TestBroker, messages: { topic: string; payload: string }[]): Promise<number> {
  const client = await mqtt.connectAsync(broker.url, { protocolVersion: 5 });
  const t0 = performance.now();
  await Promise.all(messages.map((m) => client.publishAsync(m.topic, m.payload, { qos: 1 })));
  const ms = performance.now() - t0;
  await client.endAsync();
  return ms;
}

/** The agent: buffered records flushed by the outbox publisher until every one is marked delivered. */
async function agentFlush(broker: TestBroker, recs: TransactionRecord[], dir: string, run: number): Promise<{ ms: number; window: number }> {
  const topics = new Topics('chair-agent', 'bench');
  const outbox = new Outbox({ path: join(dir, `flush-${run}.db`) });
  outbox.open();
  outbox.insert(recs, 'poll', Date.now());
  const client = new MqttBroker({
    url: broker.url,
    clientId: `bench-${run}`,
    rejectUnauthorized: true,
    protocolVersion: 5,
    keepaliveSeconds: 30,
    reconnectSeconds: 1,
    will: { topic: topics.bridgeState, payload: '{"state":"offline"}' },
    clock: systemClock,
    logger: silentLogger(),
  });
  const connected = new Promise<void>((r) => client.once('connect', () => r()));
  client.connect();
  await connected;
  const publisher = new OutboxPublisher({
    outbox,
    broker: client,
    topics,
    clock: systemClock,
    logger: silentLogger(),
    metrics: new Metrics({ defaultMetrics: false }),
    siteId: 'bench',
    timeZone: 'Asia/Bangkok',
    maxInflight: 100,
  });
  let delivered = 0;
  const done = new Promise<void>((resolve) => {
    outbox.on('delivered', (count) => {
      delivered += count;
      if (delivered >= recs.length) resolve();
    });
  });
  const t0 = performance.now();
  publisher.start();
  await done;
  const ms = performance.now() - t0;
  const window = Math.min(100, client.receiveMaximum());
  await publisher.stop();
  await client.end(1000);
  if (outbox.stats().pending !== 0) throw new Error('the flush left records undelivered');
  outbox.close();
  return { ms, window };
}

export async function benchOutboxFlush(n = 10_000, runs = 7, tcpNoDelay = false): Promise<FlushResult> {
  const broker = await startBroker({ tcpNoDelay });
  const dir = mkdtempSync(join(tmpdir(), 'bench-flush-'));
  const bareMs: number[] = [];
  const agentMs: number[] = [];
  let window = 0;
  try {
    // One round of each first, not counted: the broker, the JIT and the disk cache warm up.
    await bareLoop(broker, records(n, -1).map((r) => ({ topic: `warm/${r.deviceId}`, payload: JSON.stringify(r.fields) })));
    await agentFlush(broker, records(n, -2), dir, -1);
    for (let run = 0; run < runs; run++) {
      const recs = records(n, run);
      const topics = new Topics('chair-agent', 'bench');
      const messages = recs.map((r, i) => ({
        topic: topics.transaction(r.deviceId),
        payload: transactionPayload({ seq: i + 1, transactionId: r.transactionId, status: r.status, deviceId: r.deviceId, record: JSON.stringify(r.fields), source: 'poll', receivedAt: Date.now(), crc: null }, 'bench', 'Asia/Bangkok'),
      }));
      // Alternate which goes first, so neither always meets a warm broker.
      if (run % 2 === 0) {
        bareMs.push(await bareLoop(broker, messages));
        const a = await agentFlush(broker, recs, dir, run);
        agentMs.push(a.ms);
        window = a.window;
      } else {
        const a = await agentFlush(broker, recs, dir, run);
        agentMs.push(a.ms);
        window = a.window;
        bareMs.push(await bareLoop(broker, messages));
      }
    }
  } finally {
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return {
    records: n,
    broker: broker.kind,
    tcpNoDelay,
    window,
    bareMs: bareMs.map((x) => round(x, 0)),
    agentMs: agentMs.map((x) => round(x, 0)),
    ratio: round(median(bareMs) / median(agentMs), 2),
  };
}
