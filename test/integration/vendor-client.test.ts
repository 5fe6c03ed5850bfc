import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { systemClock, type Clock } from '../../agent/platform/clock.js';
import { silentLogger } from '../../agent/platform/logger.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { VendorError } from '../../agent/vendor/errors.js';
import { UndiciVendorApi } from '../../agent/vendor/undici-vendor-api.js';
import { formatVendorTime } from '../../agent/time/vendor-time.js';
import { waitFor } from '../helpers/wait.js';

const API_KEY = 'test-key-abcdef';

/** The system clock, recording every wait the client asks for. */
function recordingClock(): Clock & { sleeps: number[] } {
  const sleeps: number[] = [];
  return {
    ...systemClock,
    sleeps,
    sleep(ms: number, signal?: AbortSignal) {
      sleeps.push(ms);
      return systemClock.sleep(ms, signal);
    },
  };
}

let sim: Simulator;

function client(over: Partial<ConstructorParameters<typeof UndiciVendorApi>[0]> = {}): UndiciVendorApi {
  return new UndiciVendorApi({
    baseUrl: sim.url,
    apiKey: API_KEY,
    timeoutMs: 2_000,
    retries: 2,
    backoffBaseMs: 20,
    backoffCapMs: 100,
    clock: systemClock,
    logger: silentLogger(),
    ...over,
  });
}

async function failure(p: Promise<unknown>): Promise<VendorError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(VendorError);
    return err as VendorError;
  }
  throw new Error('expected the call to fail');
}

beforeAll(async () => {
  sim = new Simulator({ apiKey: API_KEY, chairs: 3, minuteMs: 60_000 });
  await sim.start();
});
afterAll(async () => {
  await sim.close();
});
afterEach(() => {
  sim.faults.clear();
  for (const k of Object.keys(sim.requests) as (keyof typeof sim.requests)[]) sim.requests[k] = 0;
});

describe('vendor client against the simulator', () => {
  it('lists every chair in one request', async () => {
    const api = client();
    const list = await api.listChairs();
    expect(list.chairs.map((c) => c.deviceId)).toEqual(['MC7001', 'MC7002', 'MC7003']);
    expect(list.chairs[0]).toMatchObject({ status: 'Available', seated: false, leftMin: null, deviceCode: 'C01' });
    expect(sim.requests.lists).toBe(1);
    await api.close();
  });

  it('times each call on the monotonic clock: NTP stepping the wall clock back an hour mid-call does not skew the metric', async () => {
    let offset = 0;
    const seconds: number[] = [];
    const api = client({ clock: { ...systemClock, now: () => Date.now() + offset }, observe: (_e, _o, s) => seconds.push(s) });
    sim.faults.add({ mode: 'slow', delayMs: 200, endpoints: ['lists'] });
    const listing = api.listChairs();
    await waitFor(() => sim.requests.lists === 1, 'the list request at the vendor');
    offset = -3_600_000;
    await listing;
    expect(seconds).toHaveLength(1);
    expect(seconds[0]).toBeGreaterThan(0);
    expect(seconds[0]).toBeLessThan(60);
    await api.close();
  });

  it('reads one chair, and says not found for a chair the vendor does not know', async () => {
    const api = client();
    expect((await api.chairStatus('MC7002')).deviceId).toBe('MC7002');
    const err = await failure(api.chairStatus('NOPE'));
    expect(err.code).toBe('VENDOR_NOT_FOUND');
    await api.close();
  });

  it('says unauthorized for a wrong Apikey, without the key in the message', async () => {
    const api = client({ apiKey: 'wrong-key-999' });
    const err = await failure(api.listChairs());
    expect(err.code).toBe('VENDOR_UNAUTHORIZED');
    expect(err.message).not.toContain('wrong-key-999');
    expect(sim.requests.lists).toBe(1); // a refused key is not retried
    await api.close();
  });

  it('retries a 5xx with backoff and succeeds', async () => {
    sim.faults.add({ mode: 'error', status: 503, count: 2, endpoints: ['lists'] });
    const api = client();
    expect((await api.listChairs()).chairs).toHaveLength(3);
    expect(sim.requests.lists).toBe(3);
    await api.close();
  });

  it('gives up after its retries with a typed error', async () => {
    sim.faults.add({ mode: 'error', status: 500, endpoints: ['lists'] });
    const api = client();
    const err = await failure(api.listChairs());
    expect(err).toMatchObject({ code: 'VENDOR_HTTP_ERROR', status: 500 });
    expect(sim.requests.lists).toBe(3);
    await api.close();
  });

  it('honours Retry-After on a 429', async () => {
    sim.faults.add({ mode: 'rate-limit', retryAfterSeconds: 1, count: 1, endpoints: ['lists'] });
    const clock = recordingClock();
    const api = client({ clock });
    expect((await api.listChairs()).chairs).toHaveLength(3);
    expect(clock.sleeps).toEqual([1000]);
    await api.close();
  });

  it('times out a request that gets no answer, and retries it', async () => {
    sim.faults.add({ mode: 'timeout', count: 1, endpoints: ['lists'] });
    const api = client({ timeoutMs: 300 });
    expect((await api.listChairs()).chairs).toHaveLength(3);
    expect(sim.requests.lists).toBe(2);
    sim.faults.add({ mode: 'timeout', endpoints: ['lists'] });
    const err = await failure(api.listChairs({ retries: 0 }));
    expect(err.code).toBe('VENDOR_TIMEOUT');
    await api.close();
  });

  it('gets through a slow answer that is within the deadline', async () => {
    sim.faults.add({ mode: 'slow', delayMs: 300, count: 1, endpoints: ['lists'] });
    const api = client({ timeoutMs: 2_000 });
    expect((await api.listChairs()).chairs).toHaveLength(3);
    expect(sim.requests.lists).toBe(1);
    await api.close();
  });

  it('says unreachable on a connection reset, and retries it', async () => {
    sim.faults.add({ mode: 'reset', count: 1, endpoints: ['lists'] });
    const api = client();
    expect((await api.listChairs()).chairs).toHaveLength(3);
    sim.faults.add({ mode: 'reset', endpoints: ['lists'] });
    const err = await failure(api.listChairs());
    expect(err.code).toBe('VENDOR_UNREACHABLE');
    expect(sim.requests.lists).toBe(5);
    await api.close();
  });

  it('says bad envelope for a body that is not JSON, or not a success', async () => {
    const api = client();
    sim.faults.add({ mode: 'malformed', count: 1, endpoints: ['lists'] });
    expect((await failure(api.listChairs())).code).toBe('VENDOR_BAD_ENVELOPE');
    sim.faults.add({ mode: 'bad-envelope', count: 1, endpoints: ['lists'] });
    const err = await failure(api.listChairs());
    expect(err.code).toBe('VENDOR_BAD_ENVELOPE');
    expect(err.message).toContain('"error"');
    await api.close();
  });

  it('bounds what it reads: a list over maxBodyBytes, a status over 64 KiB, a record nested too deep', async () => {
    const chair = sim.model.chairs.get('MC7001')!;
    chair.statusOverride = 'x'.repeat(70 * 1024);
    try {
      const list = await failure(client({ maxBodyBytes: 32 * 1024, retries: 0 }).listChairs());
      expect(list.code).toBe('VENDOR_BAD_ENVELOPE');
      expect(list.message).toBe('vendor answer is larger than 32768 bytes');
      const status = await failure(client({ retries: 0 }).chairStatus('MC7001'));
      expect(status.message).toBe('vendor answer is larger than 65536 bytes');
    } finally {
      chair.statusOverride = null;
    }
    const deep = { TransactionId: 'DEEP', Status: 'finished', DeviceId: 'MC7001', Extra: JSON.parse(`${'['.repeat(3000)}1${']'.repeat(3000)}`) as unknown };
    const before = sim.model.transactions.length;
    sim.model.backfill(2, 60_000);
    sim.model.transactions.push({ seq: 9e6, createdAt: Date.now() - 30_000, endsAt: 0, record: deep });
    try {
      const t = formatVendorTime(Date.now() + 60_000, 'Asia/Bangkok');
      const f = formatVendorTime(Date.now() - 3_600_000, 'Asia/Bangkok');
      const page = await client().listTransactions({ from: f, to: t, limit: 100, offset: 0, order: 'chronological' });
      expect(page.records).toHaveLength(2);
      expect(page.rejected).toEqual([{ index: 2, problem: 'nested deeper than 32 levels' }]);
      expect(page.size).toBe(3);
    } finally {
      sim.model.transactions.splice(before);
    }
  });

  it('says unreachable, not sent, when nothing listens', async () => {
    const port = sim.port;
    await sim.stop();
    try {
      const api = client({ retries: 0 });
      const err = await failure(api.control('MC7001', 5));
      expect(err).toMatchObject({ code: 'VENDOR_UNREACHABLE', ambiguous: false });
      await api.close();
    } finally {
      await sim.start();
      expect(sim.port).toBe(port);
    }
  });

  it('never retries the control call, and flags a lost answer as ambiguous', async () => {
    const api = client();
    sim.faults.add({ mode: 'error', status: 502, count: 1, endpoints: ['control'] });
    const err = await failure(api.control('MC7001', 5));
    expect(err).toMatchObject({ code: 'VENDOR_HTTP_ERROR', ambiguous: true });
    expect(sim.requests.control).toBe(1);

    sim.faults.add({ mode: 'timeout', count: 1, endpoints: ['control'], commit: true });
    const fast = client({ timeoutMs: 300 });
    const timeout = await failure(fast.control('MC7002', 5));
    expect(timeout).toMatchObject({ code: 'VENDOR_TIMEOUT', ambiguous: true });
    expect(sim.requests.control).toBe(2);
    // The vendor did act on it: the status call tells.
    expect(await api.chairStatus('MC7002')).toMatchObject({ status: 'Running', leftMin: 5, leftSec: 0 });
    await Promise.all([api.close(), fast.close()]);
  });

  it('starts a chair and reports a refusal for a busy one', async () => {
    const api = client();
    await api.control('MC7003', 2);
    const status = await api.chairStatus('MC7003');
    expect(status).toMatchObject({ status: 'Running', seated: true, leftMin: 2, leftSec: 0 });
    const err = await failure(api.control('MC7003', 2));
    expect(err).toMatchObject({ code: 'VENDOR_REFUSED', status: 409, ambiguous: false });
    await api.close();
  });

  it('pages the transaction list with from/to/limit/offset/order', async () => {
    sim.model.backfill(45, 30 * 60_000, 'MC7001');
    const api = client();
    const now = Date.now();
    const q = { from: formatVendorTime(now - 3_600_000, 'Asia/Bangkok'), to: formatVendorTime(now, 'Asia/Bangkok'), limit: 20, order: 'chronological' };
    const pages = [];
    for (let offset = 0; ; offset += 20) {
      const page = await api.listTransactions({ ...q, offset });
      pages.push(page);
      if (page.size < 20) break;
    }
    const records = pages.flatMap((p) => p.records);
    expect(pages.map((p) => p.size)).toEqual([20, 20, records.length - 40]);
    expect(records.length).toBeGreaterThanOrEqual(45);
    const times = records.map((r) => r.transactionTime ?? '');
    expect([...times].sort()).toEqual(times);
    expect(records[0]?.fields).toHaveProperty('PaymentMethod');
    await api.close();
  });
});
