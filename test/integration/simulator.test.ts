import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifySignature } from '../../agent/http/sign.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { waitFor } from '../helpers/wait.js';

const KEY = 'sim-test-key';
const SECRET = 'sim-test-secret';

let sim: Simulator;
let hook: Server;
const received: { body: Record<string, unknown>; valid: boolean }[] = [];

async function api(path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(`${sim.url}${path}`, init);
}

async function admin(method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${sim.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

beforeAll(async () => {
  hook = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      received.push({ body: JSON.parse(raw.toString()) as Record<string, unknown>, valid: verifySignature(raw, req.headers['x-vendor-signature'], SECRET) });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => hook.listen(0, '127.0.0.1', () => r()));
  const port = (hook.address() as AddressInfo).port;
  sim = new Simulator({ apiKey: KEY, chairs: 2, minuteMs: 200, webhook: { url: `http://127.0.0.1:${port}/hook`, secret: SECRET } });
  await sim.start();
});

afterAll(async () => {
  await sim.close();
  await new Promise<void>((r) => hook.close(() => r()));
});

describe('vendor simulator', () => {
  it('checks the Apikey on every endpoint', async () => {
    for (const path of ['/api/chair/lists', '/api/chair/status/MC7001', '/api/chair/transactions']) {
      const r = await api(path, { headers: { Apikey: 'nope' } });
      expect(r.status).toBe(401);
    }
    const ok = await api('/api/chair/lists', { headers: { Apikey: KEY } });
    const body = (await ok.json()) as { status: string; code: number; data: unknown[] };
    expect(body).toMatchObject({ status: 'success', code: 200 });
    expect(body.data).toHaveLength(2);
  });

  it('starts a chair on a control call, counts it down, and sends signed playing and finished webhooks', async () => {
    const r = await api('/api/chair/control', {
      method: 'POST',
      headers: { Apikey: KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ DeviceId: 'MC7001', Time: '1' }),
    });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({});
    const status = (await (await api('/api/chair/status/MC7001', { headers: { Apikey: KEY } })).json()) as { data: Record<string, unknown> };
    expect(status.data).toMatchObject({ DeviceId: 'MC7001', Status: 'Running', Seated: true });
    await waitFor(() => received.length >= 2, 'playing and finished webhooks');
    expect(received.map((h) => [h.body['Status'], h.body['PaymentMethod'], h.valid])).toEqual([
      ['playing', 'manual', true],
      ['finished', 'manual', true],
    ]);
    const idle = (await (await api('/api/chair/status/MC7001', { headers: { Apikey: KEY } })).json()) as { data: Record<string, unknown> };
    expect(idle.data).toMatchObject({ Status: 'Available', LeftMin: null, LeftSec: null });
  });

  it('makes a paid use over its control route', async () => {
    const r = await admin('POST', '/sim/paid', { deviceId: 'MC7002', minutes: 1 });
    expect(r.status).toBe(200);
    const tx = (await r.json()) as Record<string, unknown>;
    expect(tx).toMatchObject({ DeviceId: 'MC7002', PaymentMethod: 'promptpay', Status: 'playing', Amount: '20.00' });
    expect(Object.keys(tx).sort()).toEqual(
      ['Amount', 'DeviceId', 'Label', 'Location', 'MassageChair', 'PaymentMethod', 'PaymentReference', 'PlayTime', 'Status', 'TransactionCode', 'TransactionId', 'TransactionTime'].sort(),
    );
    const busy = await admin('POST', '/sim/paid', { deviceId: 'MC7002' });
    expect(busy.status).toBe(409);
  });

  it('switches faults on and off over HTTP', async () => {
    expect((await admin('POST', '/sim/faults', { mode: 'error', status: 503, count: 1, endpoints: ['lists'] })).status).toBe(200);
    expect((await api('/api/chair/lists', { headers: { Apikey: KEY } })).status).toBe(503);
    expect((await api('/api/chair/lists', { headers: { Apikey: KEY } })).status).toBe(200);
    await admin('POST', '/sim/faults', { mode: 'malformed', endpoints: ['lists'] });
    const bad = await (await api('/api/chair/lists', { headers: { Apikey: KEY } })).text();
    expect(() => JSON.parse(bad)).toThrow();
    await admin('DELETE', '/sim/faults');
    expect((await api('/api/chair/lists', { headers: { Apikey: KEY } })).status).toBe(200);
    const refused = await admin('POST', '/sim/faults', { mode: 'explode' });
    expect(refused.status).toBe(400);
  });

  it('filters and pages transactions by from/to, limit, offset and order', async () => {
    await admin('POST', '/sim/transactions', { count: 30, spreadMinutes: 120 });
    const all = (await (await api('/api/chair/transactions?limit=1000&order=chronological', { headers: { Apikey: KEY } })).json()) as {
      data: { TransactionTime: string }[];
    };
    const times = all.data.map((t) => t.TransactionTime);
    expect([...times].sort()).toEqual(times);
    const mid = times[10] as string;
    const page = (await (await api(`/api/chair/transactions?from=${encodeURIComponent(mid)}&limit=5&offset=2&order=chronological`, { headers: { Apikey: KEY } })).json()) as {
      data: { TransactionTime: string }[];
    };
    expect(page.data).toHaveLength(5);
    expect(page.data.every((t) => t.TransactionTime >= mid)).toBe(true);
    const bad = await api('/api/chair/transactions?from=last-tuesday', { headers: { Apikey: KEY } });
    expect(bad.status).toBe(400);
  });

  it('reports its state, including requests per endpoint', async () => {
    const state = (await (await admin('GET', '/sim/state')).json()) as { requests: Record<string, number>; chairs: unknown[] };
    expect(state.chairs).toHaveLength(2);
    expect(state.requests['lists']).toBeGreaterThan(0);
  });
});
