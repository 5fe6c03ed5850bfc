import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { build, type Agent } from '../../agent/build.js';
import { pubackCodeAccepted } from '../../agent/mqtt/lenient-acks.js';
import { Topics } from '../../agent/mqtt/topics.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { parkRetryDelayMs } from '../../agent/store/outbox.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { runCli } from '../helpers/cli.js';
import { TEST_API_KEY, testConfig } from '../helpers/config.js';
import { memoryLogger, type LogRecord } from '../helpers/memory-logger.js';
import { vendorRecord } from '../helpers/records.js';
import { Subscriber, type Received } from '../helpers/subscriber.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { waitFor } from '../helpers/wait.js';
import { describeWith } from '../helpers/tools.js';
import { webhookStatus } from '../helpers/webhook.js';

let sim: Simulator;
beforeAll(async () => {
  sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 2 });
  await sim.start();
});
afterAll(() => sim.close());

interface Site {
  agent: Agent;
  lines: LogRecord[];
  base: string;
  db: string;
  config: string;
  stop(): Promise<void>;
}

/** An agent with a file database and a config file (for the outbox CLI), against `brokerUrl`. */
async function site(id: string, brokerUrl: string, mqtt: Record<string, unknown> = {}, db?: string): Promise<Site> {
  const dir = mkdtempSync(join(tmpdir(), `hostile-${id}-`));
  const dbPath = db ?? join(dir, 'agent.db');
  const { logger, lines } = memoryLogger('info');
  const cfg = testConfig({ vendorUrl: sim.url, brokerUrl, dbPath }, { site: { id }, mqtt, transactions: { syncSchedule: '0 0 0 1 1 *' } });
  const agent = build(cfg, { logger });
  await agent.start();
  const config = join(dir, 'config.yaml');
  writeFileSync(config, `site: {id: ${id}}\nvendor: {baseUrl: "${sim.url}", apiKey: ${TEST_API_KEY}}\nwebhook: {enabled: false}\nstorage: {path: ${dbPath}}\n`);
  return { agent, lines, base: `http://127.0.0.1:${agent.http.address().port}`, db: dbPath, config, stop: () => agent.stop() };
}


const tx = (m: Received): Record<string, unknown> => JSON.parse(m.text) as Record<string, unknown>;

describeWith('mosquitto', 'one unpublishable record never stops the others', () => {
  let broker: TestBroker;
  beforeAll(async () => {
    broker = await startBroker();
  });
  afterAll(() => broker.stop());

  it('DeviceIds MQTT forbids in a topic arrive by webhook, list and chair list, and are published under safe levels in order', async () => {
    const hostile = ['MC\u0000X', 'MC\nX', 'MC\tX', 'MC\u007fX', 'MC\u0085X', 'MC\ufffeX', 'MC\ud800X', 'a/b+#', 'Z'.repeat(60_000), ''];
    const s = await site('topics', broker.url);
    const topics = new Topics('chair-agent', 'topics');
    const sub = await Subscriber.connect(broker.url, 'chair-agent/topics/#');
    try {
      // By webhook, each hostile id followed by a plain one.
      const sent: Record<string, unknown>[] = [];
      for (const id of hostile) {
        for (const rec of [vendorRecord({ DeviceId: id }), vendorRecord({ DeviceId: 'MC7001' })]) {
          expect(await webhookStatus(s.base, rec)).toBe(id === '' && rec['DeviceId'] === '' ? 400 : 200);
          if (rec['DeviceId'] !== '') sent.push(rec);
        }
      }
      // By the transaction list.
      // By the transaction list, one with a DeviceId longer than a whole topic may be (65,535 bytes).
      const listed = [vendorRecord({ DeviceId: 'MC\u0000LIST' }), vendorRecord({ DeviceId: '語'.repeat(30_000) })];
      listed.forEach((record, i) => sim.model.transactions.push({ seq: 1e6 + i, createdAt: Date.now() - 60_000, endsAt: 0, record }));
      await s.agent.sync.run();
      sent.push(...listed);
      // By the chair list: a chair whose id has a newline.
      sim.model.chairs.set('MC\nCHAIR', { ...sim.model.chairs.get('MC7001')!, deviceId: 'MC\nCHAIR' });

      await waitFor(() => sent.every((r) => sub.messages.some((m) => m.topic.includes('/transactions/') && tx(m)['TransactionId'] === r['TransactionId'])), 'every record');
      for (const r of sent) {
        const m = sub.messages.find((x) => x.topic.includes('/transactions/') && tx(x)['TransactionId'] === r['TransactionId'])!;
        expect(m.topic).toBe(topics.transaction(r['DeviceId'] as string));
        expect(tx(m)['DeviceId']).toBe(r['DeviceId']); // the payload keeps it verbatim
      }
      expect(topics.transaction('MC\u0000X')).toBe('chair-agent/topics/transactions/MC%00X');
      expect(topics.transaction('MC\ud800X')).toBe('chair-agent/topics/transactions/MC\ufffdX');
      expect(topics.transaction('a/b+#')).toBe('chair-agent/topics/transactions/a%2Fb%2B%23');
      expect(Buffer.byteLength(topics.transaction('語'.repeat(30_000)))).toBeLessThan(300);
      // Per chair, in the order stored.
      const plain = sub.messages.filter((m) => m.topic === 'chair-agent/topics/transactions/MC7001').map((m) => (tx(m)['agent'] as { seq: number }).seq);
      expect(plain).toEqual([...plain].sort((a, b) => a - b));
      await sub.waitFor((m) => m.topic === 'chair-agent/topics/chairs/MC%0ACHAIR', 'the hostile chair state');
      await waitFor(() => s.agent.outbox.stats().pending === 0, 'an empty backlog');
      expect(sub.messages.filter((m) => m.topic === 'chair-agent/topics/bridge/state').map((m) => m.text)).toEqual(['{"state":"online"}']);
    } finally {
      sim.model.chairs.delete('MC\nCHAIR');
      sim.model.transactions.splice(0);
      await sub.close();
      await s.stop();
    }
  });

  it('a record that makes the broker drop the connection is parked after two tries alone; the rest flows', async () => {
    const proxy = new TcpProxy(broker.port);
    await proxy.start();
    proxy.cutOn = Buffer.from('POISON-PILL');
    const s = await site('poison', proxy.url);
    const sub = await Subscriber.connect(broker.url, 'chair-agent/poison/transactions/+');
    try {
      await waitFor(() => s.agent.broker.connected, 'connected');
      const records = Array.from({ length: 12 }, (_, i) => vendorRecord({ DeviceId: 'MC7001', Label: i === 4 ? 'POISON-PILL' : null }));
      for (const r of records) expect(await webhookStatus(s.base, r)).toBe(200);
      const good = records.filter((_, i) => i !== 4).map((r) => r['TransactionId']);
      await waitFor(() => good.every((id) => sub.messages.some((m) => tx(m)['TransactionId'] === id)), 'the 11 good records');
      expect(sub.messages.map((m) => tx(m)['TransactionId']).filter((id) => id === records[4]!['TransactionId'])).toEqual([]);
      await waitFor(() => s.agent.outbox.stats().parked === 1, 'the poisonous record parked');
      expect(proxy.cuts).toBeLessThanOrEqual(4);
      expect(s.lines.find((l) => l.msg.startsWith('transaction parked'))?.['reason']).toBe('the broker closed the connection each time it was sent (2 times)');
      // Visible: the outbox command, /metrics, bridge/info.
      // Delivered marks are committed in batches (at most 200 ms later): the command reads the file.
      const cli = await waitFor(async () => {
        const r = await runCli(['outbox', '--parked', '--config', s.config]);
        return /waiting:\s+1 \(1 parked: the broker refused them; see --parked\)/.test(r.stdout) ? r : null;
      }, 'the outbox command to show the one parked record');
      expect(cli.stdout).toContain(`${records[4]!['TransactionId'] as string} playing MC7001: the broker closed the connection each time it was sent (2 times)`);
      expect(await (await fetch(`${s.base}/metrics`)).text()).toMatch(/^chair_agent_outbox_parked 1$/m);
      const info = await Subscriber.connect(broker.url, 'chair-agent/poison/bridge/info');
      await waitFor(() => info.messages.some((m) => (tx(m)['backlog'] as { parked: number }).parked === 1), 'bridge/info with the parked record');
      await info.close();

      // Later records are not held up by it, nor after a restart.
      await s.stop();
      const again = await site('poison', proxy.url, {}, s.db);
      const later = vendorRecord({ DeviceId: 'MC7001' });
      expect(await webhookStatus(again.base, later)).toBe(200);
      await sub.waitFor((m) => tx(m)['TransactionId'] === later['TransactionId'], 'a record after the restart');
      // Once the broker takes it, a retry (here asked for; on its own after 1 h) delivers it.
      proxy.cutOn = null;
      await again.agent.publisher.retryParked(true);
      await sub.waitFor((m) => tx(m)['TransactionId'] === records[4]!['TransactionId'], 'the parked record, retried');
      await waitFor(() => again.agent.outbox.stats().pending === 0, 'nothing waiting');
      await again.stop();
    } finally {
      await sub.close();
      await proxy.stop();
    }
  });

  it('parked records are retried 1 h after parking, then 2, 4, 8, 16 and every 24 h at most', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 20].map((n) => parkRetryDelayMs(n) / 3_600_000)).toEqual([1, 2, 4, 8, 16, 24, 24, 24]);
  });
});

describeWith('mosquitto', 'a broker that skips a message', () => {
  it('a record whose PUBACK never comes while later ones are acknowledged is parked after mqtt.ackTimeoutSeconds', async () => {
    const broker = await startBroker();
    const proxy = new TcpProxy(broker.port);
    await proxy.start();
    proxy.swallowAckOf = Buffer.from('SKIPPED-BY-BROKER');
    const s = await site('skip', proxy.url, { ackTimeoutSeconds: 0.5 });
    const sub = await Subscriber.connect(broker.url, 'chair-agent/skip/transactions/+');
    try {
      await waitFor(() => s.agent.broker.connected, 'connected');
      const records = [vendorRecord({ Label: 'SKIPPED-BY-BROKER' }), vendorRecord(), vendorRecord()];
      for (const r of records) expect(await webhookStatus(s.base, r)).toBe(200);
      await waitFor(() => s.agent.outbox.stats().parked === 1, 'the skipped record parked');
      expect(s.agent.outbox.parking.list()[0]).toMatchObject({ transactionId: records[0]!['TransactionId'] });
      expect(s.agent.outbox.parking.list()[0]?.reason).toMatch(/acknowledged later records but never this one/);
      await waitFor(() => s.agent.outbox.stats().pending === 1, 'the others delivered');
      expect(s.agent.broker.connected).toBe(true);
    } finally {
      await sub.close();
      await s.stop();
      await proxy.stop();
      await broker.stop();
    }
  });
});

describeWith('mosquitto', 'refusals of an MQTT 5 broker (Mosquitto)', () => {
  it('a record the broker refuses (ACL: PUBACK 0x87) is parked at once with the reason; the others are delivered', async () => {
    // Mosquitto started as root reads its files as the mosquitto user.
    const dir = mkdtempSync(join(tmpdir(), 'acl-'));
    chmodSync(dir, 0o755);
    writeFileSync(join(dir, 'acl'), 'topic readwrite #\ntopic deny chair-agent/acl/transactions/BLOCKED\n', { mode: 0o644 });
    const broker = await startBroker({ extra: `acl_file ${join(dir, 'acl')}\n` });
    const s = await site('acl', broker.url);
    const sub = await Subscriber.connect(broker.url, 'chair-agent/acl/transactions/+');
    try {
      const records = [vendorRecord({ DeviceId: 'MC7001' }), vendorRecord({ DeviceId: 'BLOCKED' }), vendorRecord({ DeviceId: 'MC7002' })];
      for (const r of records) expect(await webhookStatus(s.base, r)).toBe(200);
      await waitFor(() => s.agent.outbox.stats().parked === 1 && s.agent.outbox.stats().pending === 1, 'one parked, the rest delivered');
      expect(sub.messages.map((m) => `${m.topic} ${tx(m)['TransactionId'] as string}`).sort()).toEqual(
        [`chair-agent/acl/transactions/MC7001 ${records[0]!['TransactionId'] as string}`, `chair-agent/acl/transactions/MC7002 ${records[2]!['TransactionId'] as string}`].sort(),
      );
      expect(s.agent.outbox.parking.list()[0]?.reason).toMatch(/^the broker refused it: Publish error: Not authorized \(reason code 0x87\)/);
    } finally {
      await sub.close();
      await s.stop();
      await broker.stop();
    }
  });

  it('a record over message_size_limit (answered with PUBACK 0x95, which MQTT 5 does not allow there) is parked as refused, and the connection stays', async () => {
    expect(pubackCodeAccepted(0x95)).toBe(true);
    const broker = await startBroker({ extra: 'message_size_limit 4000\n' });
    const s = await site('size', broker.url);
    const sub = await Subscriber.connect(broker.url, 'chair-agent/size/transactions/+');
    try {
      const records = [vendorRecord({ Label: 'x'.repeat(10_000) }), vendorRecord(), vendorRecord()];
      for (const r of records) expect(await webhookStatus(s.base, r)).toBe(200);
      await waitFor(() => s.agent.outbox.stats().parked === 1, 'the oversized record parked');
      expect(s.agent.outbox.parking.list()[0]).toMatchObject({ transactionId: records[0]!['TransactionId'], reason: expect.stringMatching(/^the broker refused it: .*\(reason code 0x95\)/) });
      await waitFor(() => sub.messages.length === 2, 'the two others');
      const more = vendorRecord();
      expect(await webhookStatus(s.base, more)).toBe(200);
      await sub.waitFor((m) => tx(m)['TransactionId'] === more['TransactionId'], 'the next record');
      // One refused message is not a reason to lose the connection.
      expect(s.lines.filter((l) => l.msg === 'connected to the broker')).toHaveLength(1);
      expect(s.lines.some((l) => String(l['err'] ?? '').includes('Invalid puback reason code'))).toBe(false);
    } finally {
      await sub.close();
      await s.stop();
      await broker.stop();
    }
  });
});
