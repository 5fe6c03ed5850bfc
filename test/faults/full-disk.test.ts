import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { build } from '../../agent/build.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { TEST_API_KEY, testConfig } from '../helpers/config.js';
import { memoryLogger } from '../helpers/memory-logger.js';
import { vendorRecord } from '../helpers/records.js';
import { Subscriber } from '../helpers/subscriber.js';
import { waitFor } from '../helpers/wait.js';
import { describeWith } from '../helpers/tools.js';
import { webhookStatus } from '../helpers/webhook.js';

let broker: TestBroker;
let sim: Simulator;

beforeAll(async () => {
  broker = await startBroker();
  sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 2 });
  await sim.start();
});
afterAll(async () => {
  await sim.close();
  await broker.stop();
});

describeWith('mosquitto', 'a full database', () => {
  it('keeps the agent running and degraded, says why, and loses nothing already stored', async () => {
    const dbPath = join(mkdtempSync(join(tmpdir(), 'full-')), 'agent.db');
    const { logger, lines } = memoryLogger('info');
    const agent = build(
      testConfig({ vendorUrl: sim.url, brokerUrl: 'mqtt://127.0.0.1:1', dbPath }, { site: { id: 'full' }, storage: { maxSizeMb: 0.25 } }),
      { logger },
    );
    await agent.start();
    const url = `http://127.0.0.1:${agent.http.address().port}`;
    const accepted: string[] = [];
    let status = 200;
    while (status === 200) {
      const rec = vendorRecord({ Label: 'z'.repeat(3000) });
      status = await webhookStatus(url, rec);
      if (status === 200) accepted.push(String(rec['TransactionId']));
    }
    expect(status).toBe(503);

    const health = await fetch(`${url}/healthz`);
    expect(health.status).toBe(503);
    const checks = ((await health.json()) as { checks: Record<string, { ok: boolean; detail: string }> }).checks;
    expect(checks['database']).toMatchObject({ ok: false, detail: 'database full while storing transactions (disk or storage.maxSizeMb)' });
    expect(lines.some((l) => l.level === 'error' && l.component === 'store' && /database not writable/.test(l.msg))).toBe(true);
    await waitFor(() => agent.registry.view('MC7001')?.online, 'polling to go on while the disk is full');

    // The broker comes into reach: everything stored before the disk filled goes out.
    await agent.stop();
    const sub = await Subscriber.connect(broker.url, 'chair-agent/full/transactions/+');
    const again = build(testConfig({ vendorUrl: sim.url, brokerUrl: broker.url, dbPath }, { site: { id: 'full' }, storage: { maxSizeMb: 0.25 } }), { logger });
    await again.start();
    await waitFor(() => sub.messages.length >= accepted.length, 'every accepted record');
    expect(new Set(sub.messages.map((m) => (JSON.parse(m.text) as { TransactionId: string }).TransactionId))).toEqual(new Set(accepted));
    await again.stop();
    await sub.close();
  });
});
