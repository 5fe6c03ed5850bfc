import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeWith } from '../helpers/tools.js';
import { build } from '../../agent/build.js';
import { signBody } from '../../agent/http/sign.js';
import { silentLogger } from '../../agent/platform/logger.js';
import { startRig, type Rig } from '../helpers/rig.js';
import { Subscriber } from '../helpers/subscriber.js';
import { TEST_SECRET, testConfig } from '../helpers/config.js';
import { vendorRecord } from '../helpers/records.js';

/**
 * `webhook.port`: the vendor's webhook on a listener of its own, the one port a site opens to
 * the vendor, while the status page, health and metrics stay on http.port. Real broker, the
 * simulator, the agent wired as `run` wires it.
 */
const post = (url: string, body: string, signature = signBody(body, TEST_SECRET)): Promise<Response> =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-vendor-signature': signature }, body });

describeWith('mosquitto', 'the webhook on a port of its own (webhook.port)', () => {
  let rig: Rig;
  let webhookBase: string;
  let sub: Subscriber;

  beforeAll(async () => {
    rig = await startRig({ site: 'own-port', sections: { webhook: { port: 0 } } });
    webhookBase = `http://127.0.0.1:${rig.agent.webhookHttp.address().port}`;
    sub = await Subscriber.connect(rig.broker.url, 'chair-agent/own-port/transactions/#');
  }, 30_000);

  afterAll(async () => {
    await sub?.close();
    await rig?.close();
  });

  it('is a second listener, apart from http.port', () => {
    expect(rig.agent.webhookHttp).not.toBe(rig.agent.http);
    expect(rig.agent.webhookHttp.address().port).not.toBe(rig.agent.http.address().port);
  });

  it('stores a signed record there and delivers it to the broker', async () => {
    const rec = vendorRecord({ Status: 'finished', PaymentMethod: 'qr' });
    const r = await post(`${webhookBase}/vendor/webhook`, JSON.stringify(rec));
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({});
    const delivered = await sub.waitFor((m) => (JSON.parse(m.text) as { TransactionId?: string }).TransactionId === rec['TransactionId'], 'the record on MQTT');
    expect(delivered.topic).toBe(`chair-agent/own-port/transactions/${String(rec['DeviceId'])}`);
  });

  it('serves nothing else there: no status page, health, metrics or simulated GPIO', async () => {
    for (const path of ['/', '/healthz', '/metrics', '/sim/gpio', '/events']) {
      const r = await fetch(`${webhookBase}${path}`);
      await r.arrayBuffer();
      expect([path, r.status]).toEqual([path, 404]);
    }
  });

  it('no longer serves the webhook on http.port, which keeps the rest', async () => {
    const body = JSON.stringify(vendorRecord());
    const r = await post(`${rig.base}/vendor/webhook`, body);
    await r.arrayBuffer();
    expect(r.status).toBe(404);
    for (const path of ['/', '/healthz', '/metrics']) {
      const kept = await fetch(`${rig.base}${path}`);
      await kept.arrayBuffer();
      expect([path, kept.status]).toEqual([path, 200]);
    }
  });

  it('counts its answers and refusals in the metrics on http.port', async () => {
    const body = JSON.stringify(vendorRecord());
    const r = await post(`${webhookBase}/vendor/webhook`, body, signBody(body, 'not-the-secret'));
    await r.arrayBuffer();
    expect(r.status).toBe(401);
    const metrics = await (await fetch(`${rig.base}/metrics`)).text();
    expect(metrics).toMatch(/^chair_agent_webhook_requests_total\{status="200"\} [1-9]/m);
    expect(metrics).toMatch(/^chair_agent_webhook_requests_total\{status="401"\} [1-9]/m);
  });
});

describe('a webhook port that is taken', () => {
  it('stops the start with an error that names webhook.port, and leaves nothing listening', async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const taken = (holder.address() as { port: number }).port;
    try {
      // Nothing answers at the vendor's or the broker's address: the start stops before either is tried.
      const agent = build(testConfig({ vendorUrl: 'http://127.0.0.1:9', brokerUrl: 'mqtt://127.0.0.1:9' }, { site: { id: 'taken' }, webhook: { port: taken } }), { logger: silentLogger() });
      await expect(agent.start()).rejects.toMatchObject({ code: 'HTTP_LISTEN_FAILED', message: `cannot listen on 127.0.0.1:${taken}: the port is in use (http.host/webhook.port)` });
      await expect(fetch(`http://127.0.0.1:${agent.http.address().port}/healthz`)).rejects.toThrow();
    } finally {
      holder.close();
    }
  });
});
