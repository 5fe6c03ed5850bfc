import { mkdtempSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../agent/platform/clock.js';
import { webhookHandler } from '../../agent/http/webhook.js';
import { HttpListener } from '../../agent/http/listener.js';
import { signBody } from '../../agent/http/sign.js';
import { silentLogger } from '../../agent/platform/logger.js';
import { Metrics } from '../../agent/observe/metrics.js';
import { GroupCommit } from '../../agent/store/group-commit.js';
import { Outbox } from '../../agent/store/outbox.js';
import { vendorRecord } from '../helpers/records.js';

const SECRET = 'webhook-test-secret';

interface Site {
  listener: HttpListener;
  outbox: Outbox;
  dbPath: string;
  url: string;
}

async function site(maxSizeMb?: number): Promise<Site> {
  const dbPath = join(mkdtempSync(join(tmpdir(), 'wh-')), 'agent.db');
  const outbox = new Outbox({ path: dbPath, maxSizeMb });
  outbox.open();
  const listener = new HttpListener({ host: '127.0.0.1', port: 0, logger: silentLogger(), headersTimeoutMs: 500, requestTimeoutMs: 1_000, clock: systemClock });
  listener.route(
    'POST',
    '/vendor/webhook',
    webhookHandler({ secret: SECRET, commits: new GroupCommit(outbox, 'webhook', systemClock), logger: silentLogger(), metrics: new Metrics({ defaultMetrics: false }), refusals: listener.refusals }),
  );
  await listener.start();
  return { listener, outbox, dbPath, url: `http://127.0.0.1:${listener.address().port}/vendor/webhook` };
}

async function post(url: string, body: string | Buffer, headers: Record<string, string> = {}): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

const signed = (body: string | Buffer): Record<string, string> => ({ 'x-vendor-signature': signBody(body, SECRET) });

let s: Site;
beforeAll(async () => {
  s = await site();
});
afterAll(async () => {
  await s.listener.stop();
  s.outbox.close();
});

describe('webhook receiver', () => {
  it('stores a signed transaction record and answers 200 {} after the commit', async () => {
    const rec = vendorRecord({ Status: 'playing', PaymentMethod: 'manual' });
    const body = JSON.stringify(rec);
    const r = await post(s.url, body, signed(body));
    expect(r).toEqual({ status: 200, body: {} });
    const stored = s.outbox.pending(0, 1000).find((x) => x.transactionId === rec['TransactionId']);
    expect(stored).toMatchObject({ status: 'playing', source: 'webhook' });
    expect(JSON.parse(stored!.record)).toEqual(rec);
  });

  it('answers a replayed or concurrent duplicate 200 and stores it once', async () => {
    const body = JSON.stringify(vendorRecord());
    const answers = await Promise.all(Array.from({ length: 10 }, () => post(s.url, body, signed(body))));
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    const id = (JSON.parse(body) as { TransactionId: string }).TransactionId;
    expect(s.outbox.pending(0, 1000).filter((r) => r.transactionId === id)).toHaveLength(1);
  });

  it('answers each of many concurrent webhooks only once its record can be read from the file by another connection', async () => {
    const reader = new Outbox({ path: s.dbPath, readonly: true });
    reader.open();
    try {
      const recs = Array.from({ length: 40 }, () => vendorRecord());
      const seenAtAnswer = await Promise.all(
        recs.map(async (rec) => {
          const body = JSON.stringify(rec);
          const r = await post(s.url, body, signed(body));
          return { status: r.status, stored: reader.find(String(rec['TransactionId']), String(rec['Status'])) !== undefined };
        }),
      );
      expect(seenAtAnswer).toEqual(Array(40).fill({ status: 200, stored: true }));
    } finally {
      reader.close();
    }
  });

  it.each([
    ['no signature', {}],
    ['a signature of other bytes', { 'x-vendor-signature': signBody('{}', SECRET) }],
    ['a signature with the wrong secret', 'wrong-secret'],
    ['a signature of the wrong length', { 'x-vendor-signature': 'c2hvcnQ=' }],
    ['a signature that is not base64', { 'x-vendor-signature': '!'.repeat(44) }],
    ['an empty signature', { 'x-vendor-signature': '' }],
  ])('answers 401 to %s, and stores nothing', async (_what, headers) => {
    const body = JSON.stringify(vendorRecord());
    const h = headers === 'wrong-secret' ? { 'x-vendor-signature': signBody(body, 'not-the-secret') } : (headers as Record<string, string>);
    const before = s.outbox.stats().pending;
    const r = await post(s.url, body, h);
    expect(r.status).toBe(401);
    expect(s.outbox.stats().pending).toBe(before);
  });

  it('checks the signature over the raw bytes, not a re-serialised body', async () => {
    const body = `{ "TransactionId": "RAW-1",\n  "Status": "playing", "DeviceId": "MC7001" }`;
    expect((await post(s.url, body, signed(body))).status).toBe(200);
    const reformatted = JSON.stringify(JSON.parse(body));
    expect((await post(s.url, reformatted, signed(body))).status).toBe(401);
  });

  it.each([
    ['a body that is not JSON', 'not json at all'],
    ['a JSON list', '[1,2,3]'],
    ['a record without TransactionId', JSON.stringify({ Status: 'playing', DeviceId: 'MC7001' })],
    ['a record without DeviceId', JSON.stringify({ TransactionId: 'x', Status: 'playing' })],
    ['an empty body', ''],
  ])('answers 400 to %s that is correctly signed', async (_what, body) => {
    const r = await post(s.url, body, signed(body));
    expect(r.status).toBe(400);
    expect((r.body as { error: string }).error).toMatch(/^not a transaction record/);
  });

  it('answers 413 to a body over 64 KiB, signed or not', async () => {
    const body = JSON.stringify(vendorRecord({ Label: 'x'.repeat(70 * 1024) }));
    expect((await post(s.url, body, signed(body))).status).toBe(413);
    expect((await post(s.url, body)).status).toBe(413);
  });

  it('answers 413 to a chunked body that grows past 64 KiB', async () => {
    const chunks = (async function* () {
      for (let i = 0; i < 20; i++) yield new TextEncoder().encode('x'.repeat(8 * 1024));
    })();
    const res = await fetch(s.url, { method: 'POST', body: chunks as unknown as RequestInit['body'], duplex: 'half' } as RequestInit);
    expect(res.status).toBe(413);
  });

  it('answers 405 to another method on the webhook path', async () => {
    expect((await fetch(s.url)).status).toBe(405);
  });

  it('drops a client that sends its headers too slowly, and keeps serving others', async () => {
    const { port } = s.listener.address();
    const socket = connect(port, '127.0.0.1');
    await new Promise<void>((r) => socket.once('connect', () => r()));
    socket.write('POST /vendor/webhook HTTP/1.1\r\nHost: x\r\n');
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString()));
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    const body = JSON.stringify(vendorRecord());
    expect((await post(s.url, body, signed(body))).status).toBe(200);
    await closed; // the server gave up on the slow one
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('answers 503 when the record cannot be stored, and 200 again once it can', async () => {
    const full = await site(0.25);
    try {
      let status = 200;
      for (let i = 0; i < 500 && status === 200; i++) {
        const body = JSON.stringify(vendorRecord({ Label: 'y'.repeat(3000) }));
        const r = await post(full.url, body, signed(body));
        status = r.status;
      }
      expect(status).toBe(503);
      const pending = full.outbox.stats().pending;
      expect(full.outbox.database.integrityCheck()).toBe('ok');
      await full.outbox.markDelivered(full.outbox.pending(0, 10_000).map((r) => r.seq), 1);
      while (await full.outbox.pruneDelivered(2, 1000) > 0);
      const body = JSON.stringify(vendorRecord());
      expect((await post(full.url, body, signed(body))).status).toBe(200);
      expect(pending).toBeGreaterThan(10);
    } finally {
      await full.listener.stop();
      full.outbox.close();
    }
  });
});
