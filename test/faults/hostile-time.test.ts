import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, type Agent } from '../../agent/build.js';
import { sleepWith, systemClock, type Clock } from '../../agent/platform/clock.js';
import { Simulator } from '../../agent/simulator/simulator.js';
import { startBroker, type TestBroker } from '../helpers/broker.js';
import { TEST_API_KEY, testConfig } from '../helpers/config.js';
import { memoryLogger, type LogRecord } from '../helpers/memory-logger.js';
import { vendorRecord } from '../helpers/records.js';
import { Subscriber } from '../helpers/subscriber.js';
import { waitFor } from '../helpers/wait.js';
import { describeWith } from '../helpers/tools.js';
import { webhookStatus } from '../helpers/webhook.js';

let broker: TestBroker;
beforeAll(async () => {
  broker = await startBroker();
});
afterAll(() => broker.stop());

/** The real clock, with a wall clock `offset.ms` off (a Pi that booted on a stale time, or NTP jumping it). */
function skewedClock(offset: { ms: number }): Clock {
  const clock: Clock = {
    now: () => Date.now() + offset.ms,
    monotonic: () => systemClock.monotonic(),
    setTimeout: (fn, ms) => systemClock.setTimeout(fn, ms),
    setInterval: (fn, ms) => systemClock.setInterval(fn, ms),
    sleep: (ms, signal) => sleepWith(clock, ms, signal),
  };
  return clock;
}

interface Site {
  agent: Agent;
  lines: LogRecord[];
  base: string;
  stop(): Promise<void>;
}

async function site(
  sim: Simulator,
  id: string,
  clock: Clock,
  transactions: Record<string, unknown> = {},
  timezone = 'Asia/Bangkok',
  sections: Record<string, Record<string, unknown>> = {},
): Promise<Site> {
  const { logger, lines } = memoryLogger('info');
  const cfg = testConfig(
    { vendorUrl: sim.url, brokerUrl: broker.url, dbPath: join(mkdtempSync(join(tmpdir(), `time-${id}-`)), 'agent.db') },
    { site: { id, timezone }, transactions: { syncSchedule: '0 0 0 1 1 *', overlapMinutes: 60, lookbackHours: 1, ...transactions }, ...sections },
  );
  const agent = build(cfg, { logger, clock });
  await agent.start();
  // The sync follows the vendor's clock once a list has given its ServerTime.
  await waitFor(() => agent.health.lastPollAt !== null, 'a first poll');
  return { agent, lines, base: `http://127.0.0.1:${agent.http.address().port}`, stop: () => agent.stop() };
}

/** Records the vendor lists from now on: dated by the vendor's clock, never sent by webhook. */
function listedOnly(sim: Simulator, n: number): string[] {
  const before = sim.model.transactions.length;
  sim.model.backfill(n, 30_000);
  return sim.model.transactions.slice(before).map((t) => t.record['TransactionId'] as string);
}

const stored = (agent: Agent, ids: string[]): boolean => ids.every((id) => agent.outbox.find(id, 'finished') !== undefined);

describeWith('mosquitto', 'the transaction sync follows the vendor clock, not the Pi\'s', () => {
  let sim: Simulator;
  beforeAll(async () => {
    sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 2 });
    await sim.start();
  });
  afterAll(() => sim.close());

  it('a box 2 h ahead of the vendor (more than the 60 min overlap) still gets every record only the list has', async () => {
    const s = await site(sim, 'ahead', skewedClock({ ms: 2 * 3_600_000 }));
    try {
      await s.agent.sync.run();
      const ids = listedOnly(sim, 10);
      await s.agent.sync.run();
      expect(stored(s.agent, ids)).toBe(true);
      expect(s.agent.health.get('clock')).toMatchObject({ ok: false });
      expect(s.agent.health.get('clock').detail).toMatch(/2 h 00 min/);
    } finally {
      await s.stop();
    }
  });

  it('a wall clock set back 3 hours while the scheduled sync runs: the next sync within a period, every listed record stored', async () => {
    const offset = { ms: 0 };
    // Every 2 s: the scheduler, not a hand-run sync, is what a step back could stall.
    const s = await site(sim, 'back-3h', skewedClock(offset), { syncSchedule: '*/2 * * * * *' });
    try {
      // Each finished sync sets lastSyncAt: count the distinct ones.
      const seen = new Set<number>();
      const runs = (): number => {
        const at = s.agent.health.lastSyncAt;
        if (at !== null) seen.add(at);
        return seen.size;
      };
      await waitFor(() => runs() > 0, 'a first scheduled sync');
      offset.ms = -3 * 3_600_000;
      const atStep = runs();
      const later = listedOnly(sim, 5);
      await waitFor(() => runs() >= atStep + 2, 'two more scheduled syncs after the step', 10_000);
      await waitFor(() => stored(s.agent, later), 'the records only the list has');
    } finally {
      await s.stop();
    }
  });

  it('a wall clock set back 3 minutes (overlap 1 min) loses nothing and does not stop the sync', async () => {
    const offset = { ms: 0 };
    const s = await site(sim, 'back', skewedClock(offset), { overlapMinutes: 1 });
    try {
      await s.agent.sync.run();
      const first = listedOnly(sim, 5);
      offset.ms = -3 * 60_000;
      await s.agent.sync.run();
      const second = listedOnly(sim, 5);
      await s.agent.sync.run();
      expect(stored(s.agent, [...first, ...second])).toBe(true);
    } finally {
      await s.stop();
    }
  });

  it('a vendor that writes its times in another zone than site.timezone: every record, and the mismatch reported in health and bridge/info', async () => {
    const utc = new Simulator({ apiKey: TEST_API_KEY, chairs: 2, timeZone: 'UTC' });
    await utc.start();
    const info = await Subscriber.connect(broker.url, 'chair-agent/zone/bridge/info');
    const s = await site(utc, 'zone', systemClock);
    try {
      await s.agent.sync.run();
      const ids = listedOnly(utc, 10);
      await s.agent.sync.run();
      expect(stored(s.agent, ids)).toBe(true);
      await waitFor(() => !s.agent.health.get('clock').ok, 'the mismatch noticed');
      expect(s.agent.health.get('clock').detail).toMatch(/read in Asia\/Bangkok, is 7 h 00 min behind this clock: the vendor probably speaks another zone/);
      s.agent.bridge.publishInfo();
      const m = await info.waitFor((x) => (JSON.parse(x.text) as { clock: { ok: boolean } }).clock.ok === false, 'bridge/info with the clock problem');
      expect((JSON.parse(m.text) as { clock: { detail: string } }).clock.detail).toMatch(/another zone/);
      expect((await fetch(`${s.base}/healthz`)).status).toBe(503);
    } finally {
      await info.close();
      await s.stop();
      await utc.close();
    }
  });
});

describe('paging that a vendor cannot fool', () => {
  it('a vendor that silently caps limit at 100 while pageSize is 200: all 250 records', async () => {
    const capped = new Simulator({ apiKey: TEST_API_KEY, chairs: 2, maxLimit: 100 });
    await capped.start();
    capped.model.backfill(250, 20 * 60_000);
    const s = await site(capped, 'cap', systemClock, { pageSize: 200 });
    try {
      await s.agent.sync.run();
      expect(s.agent.outbox.stats().pending + s.agent.outbox.stats().delivered).toBe(250);
      expect(s.lines.find((l) => l.msg.startsWith('the vendor returns at most'))).toMatchObject({ pageSize: 200, vendorCap: 100 });
      // Once the cap is known, a short page ends the window: the overlap's 280 records take 100 + 100 + 80, no probe.
      const before = capped.requests.transactions;
      capped.model.backfill(30, 60_000);
      await s.agent.sync.run();
      expect(capped.requests.transactions - before).toBe(3);
      expect(s.agent.outbox.stats().pending + s.agent.outbox.stats().delivered).toBe(280);
    } finally {
      await s.stop();
      await capped.close();
    }
  });
});

describeWith('mosquitto', 'values as the vendor sent them', () => {
  let sim: Simulator;
  beforeAll(async () => {
    sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 2 });
    await sim.start();
  });
  afterAll(() => sim.close());

  it('numbers keep their digits (150.10, 1e400) and ids above 2^53 stay distinct, by webhook and by the list', async () => {
    const s = await site(sim, 'verbatim', systemClock);
    const sub = await Subscriber.connect(broker.url, 'chair-agent/verbatim/transactions/+');
    try {
      const raw = (id: string, extra: string): string =>
        `{"TransactionId":${id},"Status":"finished","DeviceId":"MC7001","Amount":150.10,"PlayTime":5.0,"Huge":1e400,"Tiny":-0${extra}}`;
      for (const id of ['9007199254740993', '9007199254740992']) {
        expect(await webhookStatus(s.base, raw(id, ''))).toBe(200);
      }
      // By the list: the simulator serves a record whose numbers are raw JSON text.
      const listed = vendorRecord({ TransactionId: 'L-1', Status: 'finished', Amount: JSON.rawJSON('99.90') });
      sim.model.transactions.push({ seq: 1e6, createdAt: Date.now() - 30_000, endsAt: 0, record: listed });
      await s.agent.sync.run();
      await waitFor(() => sub.messages.length >= 3, 'three records');
      const texts = sub.messages.map((m) => m.text);
      expect(texts.find((t) => t.startsWith('{"TransactionId":9007199254740993,'))).toContain('"Amount":150.10,"PlayTime":5.0,"Huge":1e400,"Tiny":-0,');
      expect(texts.find((t) => t.startsWith('{"TransactionId":9007199254740992,'))).toBeDefined();
      expect(texts.find((t) => t.includes('"L-1"'))).toContain('"Amount":99.90');
    } finally {
      sim.model.transactions.splice(0);
      await sub.close();
      await s.stop();
    }
  });
});

describeWith('mosquitto', 'what the agent waits for runs on the monotonic clock, whatever NTP does to the wall clock', () => {
  let sim: Simulator;
  beforeAll(async () => {
    sim = new Simulator({ apiKey: TEST_API_KEY, chairs: 1 });
    await sim.start();
  });
  afterAll(() => sim.close());

  it('the wall clock stepped an hour ahead as the agent stops: a start hanging at the vendor still gets its drain, then is given up', async () => {
    const offset = { ms: 0 };
    const s = await site(sim, 'stop-step', skewedClock(offset), {}, 'Asia/Bangkok', { vendor: { requestTimeoutSeconds: 30 } });
    sim.faults.add({ mode: 'timeout', delayMs: 60_000, endpoints: ['control'] });
    try {
      const [chair] = s.agent.registry.knownIds();
      const start = s.agent.starts.startChair(chair as string, { source: 'cli' });
      await waitFor(() => sim.requests.control === 1, 'the control call hanging at the vendor');
      const stopped = s.stop();
      offset.ms = 3_600_000; // NTP's first step on a box that booted on a stale clock
      await stopped;
      expect(s.lines.some((l) => l.msg === 'component did not stop in time; going on')).toBe(false);
      expect(s.lines.find((l) => l.msg === 'chair start failed')?.['error']).toBe('stopping');
      expect(await start).toMatchObject({ ok: false, error: 'stopping' });
    } finally {
      sim.faults.clear();
    }
  });
});
