import { describe, expect, it } from 'vitest';
import { ChairRegistry } from '../../agent/core/chair-registry.js';
import { silentLogger } from '../../agent/platform/logger.js';
import { StartService, type StartOutcome } from '../../agent/start/start-service.js';
import { VendorError } from '../../agent/vendor/errors.js';
import type { CallOptions, ChairReading, VendorApi } from '../../agent/vendor/vendor-api.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { parseStartCommand } from '../../agent/mqtt/start-commands.js';

const reading = (id: string, running: boolean, status = running ? 'Running' : 'Available'): ChairReading => ({
  deviceId: id,
  deviceCode: null,
  deviceName: null,
  location: null,
  status,
  seated: running,
  leftMin: running ? 4 : null,
  leftSec: running ? 59 : null,
  serverTime: null,
  firmwareVersion: null,
});

/** A vendor whose control and status answers the test scripts. */
class ScriptedVendor implements VendorApi {
  controls: [string, number][] = [];
  statusReads = 0;
  controlResult: () => Promise<void> = async () => undefined;
  /** How long the control call takes. */
  controlMs = 50;
  /** Status answers in turn; the last one repeats. */
  statuses: (() => ChairReading)[] = [];
  constructor(private readonly clock: FakeClock) {}
  async listChairs(): Promise<never> {
    throw new Error('not used');
  }
  async chairStatus(_id: string): Promise<ChairReading> {
    this.statusReads++;
    const next = this.statuses.length > 1 ? this.statuses.shift()! : this.statuses[0];
    if (!next) throw new Error('no status scripted');
    await this.clock.sleep(10);
    return next();
  }
  async listTransactions(): Promise<never> {
    throw new Error('not used');
  }
  /** How long an aborted control call takes to end (a socket being torn down). */
  abortMs = 0;
  async control(id: string, minutes: number, options: CallOptions = {}): Promise<void> {
    this.controls.push([id, minutes]);
    try {
      await this.clock.sleep(this.controlMs, options.signal);
    } catch (err) {
      if (this.abortMs > 0) await this.clock.sleep(this.abortMs);
      throw err;
    }
    return this.controlResult();
  }
  async close(): Promise<void> {}
}

function setup() {
  const clock = new FakeClock();
  const vendor = new ScriptedVendor(clock);
  const registry = new ChairRegistry({ timeZone: 'UTC', availableStatuses: ['Available'], staleAfterMs: 15_000, forgetAfterMs: 3_600_000, expected: ['IDLE', 'BUSY', 'OFFLINE'] });
  registry.applyList([reading('IDLE', false), reading('BUSY', true), reading('ODD', false, 'Maintenance')], clock.monotonic());
  const starts = new StartService({
    vendor,
    registry,
    clock,
    logger: silentLogger(),
    minutesFor: (id) => (id === 'IDLE' ? 7 : 5),
    confirmTimeoutMs: 3_000,
    confirmIntervalMs: 500,
  });
  starts.start();
  const events: string[] = [];
  starts.on('starting', (id) => events.push(`starting ${id}`));
  starts.on('finished', (o) => events.push(`finished ${o.deviceId} ${o.ok ? 'ok' : o.error}`));
  /** Runs a start to its end while driving the fake clock. */
  const run = async (id: string, minutes?: number): Promise<StartOutcome> => {
    const p = starts.startChair(id, { minutes, source: 'button' });
    let done = false;
    void p.then(() => (done = true));
    for (let i = 0; i < 200 && !done; i++) await clock.advance(50);
    return p;
  };
  return { clock, vendor, registry, starts, events, run };
}

describe('start rules and the start use case', () => {
  it.each([
    ['an unknown chair', 'NOPE', 'unknown_chair'],
    ['a running chair', 'BUSY', 'chair_busy'],
    ['a chair the vendor has not listed', 'OFFLINE', 'chair_unavailable'],
    ['a chair in an unknown status', 'ODD', 'chair_unavailable'],
  ])('refuses %s without a control call', async (_what, id, error) => {
    const { vendor, run } = setup();
    const outcome = await run(id);
    expect(outcome).toMatchObject({ ok: false, error });
    expect(vendor.controls).toEqual([]);
  });

  it('refuses a chair whose list has gone stale', async () => {
    const { vendor, registry, clock, run } = setup();
    registry.refreshAvailability(clock.monotonic() + 20_000);
    expect(await run('IDLE')).toMatchObject({ ok: false, error: 'chair_unavailable' });
    expect(vendor.controls).toEqual([]);
  });

  it('makes one control call with the chair\'s minutes and confirms by status until running', async () => {
    const { vendor, run, events, registry, starts } = setup();
    let startingWhenFinished: boolean | undefined;
    starts.on('finished', () => (startingWhenFinished = starts.isStarting('IDLE')));
    vendor.statuses = [() => reading('IDLE', false), () => reading('IDLE', false), () => reading('IDLE', true)];
    expect(await run('IDLE')).toEqual({ ok: true, deviceId: 'IDLE', minutes: 7 });
    expect(startingWhenFinished).toBe(false);
    expect(vendor.controls).toEqual([['IDLE', 7]]);
    expect(vendor.statusReads).toBe(3);
    expect(events).toEqual(['starting IDLE', 'finished IDLE ok']);
    expect(registry.view('IDLE')?.state?.running).toBe(true);
  });

  it('takes the minutes of the request over the chair\'s', async () => {
    const { vendor, run } = setup();
    vendor.statuses = [() => reading('IDLE', true)];
    await run('IDLE', 12);
    expect(vendor.controls).toEqual([['IDLE', 12]]);
  });

  it('refuses a second start while the first is under way', async () => {
    const { vendor, starts, clock } = setup();
    vendor.statuses = [() => reading('IDLE', true)];
    const first = starts.startChair('IDLE', { source: 'button' });
    expect(starts.isStarting('IDLE')).toBe(true);
    const second = await starts.startChair('IDLE', { source: 'mqtt' });
    expect(second).toMatchObject({ ok: false, error: 'start_in_flight' });
    await clock.advance(1000);
    expect(await first).toMatchObject({ ok: true });
    expect(vendor.controls).toHaveLength(1);
  });

  it('asks the chair when the control call times out, and reports a start that happened', async () => {
    const { vendor, run } = setup();
    vendor.controlResult = () => Promise.reject(new VendorError('VENDOR_TIMEOUT', 'vendor did not answer control', { ambiguous: true, retryable: true }));
    vendor.statuses = [() => reading('IDLE', true)];
    expect(await run('IDLE')).toMatchObject({ ok: true });
    expect(vendor.controls).toHaveLength(1);
  });

  it('reports a timed-out start that did not happen, without calling control again', async () => {
    const { vendor, run, events } = setup();
    vendor.controlResult = () => Promise.reject(new VendorError('VENDOR_TIMEOUT', 'vendor did not answer control', { ambiguous: true, retryable: true }));
    vendor.statuses = [() => reading('IDLE', false)];
    expect(await run('IDLE')).toMatchObject({ ok: false, error: 'vendor_timeout' });
    expect(vendor.controls).toHaveLength(1);
    expect(events.at(-1)).toBe('finished IDLE vendor_timeout');
  });

  it('holds a chair whose start outcome is unknown: a POS retry 0.3 s later is refused, and the chair running 3 s later is a success', async () => {
    const { vendor, starts, clock } = setup();
    vendor.controlResult = () => Promise.reject(new VendorError('VENDOR_TIMEOUT', 'vendor did not answer control', { ambiguous: true, retryable: true }));
    let reads = 0;
    vendor.statuses = [() => reading('IDLE', ++reads > 6)]; // idle for the first reads, then running
    const first = starts.startChair('IDLE', { source: 'mqtt', transaction: 'pos-1' });
    await clock.advance(300);
    expect(await starts.startChair('IDLE', { source: 'mqtt', transaction: 'pos-1' })).toMatchObject({ ok: false, error: 'start_in_flight' });
    for (let i = 0; i < 100; i++) await clock.advance(50);
    expect(await first).toMatchObject({ ok: true });
    expect(vendor.controls).toHaveLength(1);
  });

  it('answers "not confirmed", never "did not start", while the chair has not read idle', async () => {
    const { vendor, run } = setup();
    vendor.controlResult = () => Promise.reject(new VendorError('VENDOR_UNREACHABLE', 'vendor unreachable (ECONNRESET)', { ambiguous: true, retryable: true }));
    vendor.statuses = [() => {
      throw new VendorError('VENDOR_TIMEOUT', 'no answer', { ambiguous: true });
    }];
    const outcome = await run('IDLE');
    expect(outcome).toMatchObject({ ok: false, error: 'not_confirmed' });
    expect(outcome.ok ? '' : outcome.message).toMatch(/may have started the chair.*no new start of it until the vendor lists it idle or running/);
    expect(vendor.controls).toHaveLength(1);
  });

  it('after an unknown outcome, a POS retry makes no control call until a chair list shows the chair idle', async () => {
    const { vendor, run, registry, clock } = setup();
    vendor.controlResult = () => Promise.reject(new VendorError('VENDOR_TIMEOUT', 'vendor did not answer control', { ambiguous: true, retryable: true }));
    vendor.statuses = [() => {
      throw new VendorError('VENDOR_TIMEOUT', 'no answer', { ambiguous: true });
    }];
    expect(await run('IDLE')).toMatchObject({ ok: false, error: 'not_confirmed' });
    // The POS times out and asks again: refused, no second control call.
    expect(await run('IDLE')).toMatchObject({ ok: false, error: 'start_unconfirmed' });
    expect(vendor.controls).toHaveLength(1);
    // The next chair list says idle: the earlier start did not happen, and a new one may go.
    registry.applyList([reading('IDLE', false), reading('BUSY', true)], clock.monotonic());
    vendor.controlResult = async () => undefined;
    vendor.statuses = [() => reading('IDLE', true)];
    expect(await run('IDLE')).toMatchObject({ ok: true });
    expect(vendor.controls).toHaveLength(2);
  });

  it('after an unknown outcome, starts are allowed again when start.unknownHoldSeconds pass', async () => {
    const { vendor, run, clock } = setup();
    vendor.controlResult = () => Promise.reject(new VendorError('VENDOR_TIMEOUT', 'vendor did not answer control', { ambiguous: true, retryable: true }));
    vendor.statuses = [() => {
      throw new VendorError('VENDOR_TIMEOUT', 'no answer', { ambiguous: true });
    }];
    expect(await run('IDLE')).toMatchObject({ ok: false, error: 'not_confirmed' });
    await clock.advance(119_000);
    expect(await run('IDLE')).toMatchObject({ ok: false, error: 'start_unconfirmed' });
    await clock.advance(2_000);
    await run('IDLE');
    expect(vendor.controls).toHaveLength(2);
  });

  it.each([
    [new VendorError('VENDOR_REFUSED', 'vendor refused control (HTTP 409)', { status: 409 }), 'vendor_refused'],
    [new VendorError('VENDOR_UNREACHABLE', 'vendor unreachable (ECONNREFUSED)'), 'vendor_unreachable'],
    [new VendorError('VENDOR_UNAUTHORIZED', 'vendor rejected the Apikey'), 'vendor_unauthorized'],
  ])('reports a clear refusal (%s) without reading the status', async (err, error) => {
    const { vendor, run } = setup();
    vendor.controlResult = () => Promise.reject(err);
    expect(await run('IDLE')).toMatchObject({ ok: false, error });
    expect(vendor.statusReads).toBe(0);
  });

  it('gives up confirming after its bounded wait', async () => {
    const { vendor, run } = setup();
    vendor.statuses = [() => reading('IDLE', false)];
    expect(await run('IDLE')).toMatchObject({ ok: false, error: 'not_confirmed' });
    expect(vendor.statusReads).toBeGreaterThanOrEqual(6);
    expect(vendor.statusReads).toBeLessThanOrEqual(8);
  });

  it('lets a start under way finish when stopping, and takes no new ones', async () => {
    const { vendor, starts, clock } = setup();
    vendor.statuses = [() => reading('IDLE', true)];
    const inFlight = starts.startChair('IDLE', { source: 'button' });
    const stopping = starts.stop();
    await clock.advance(500);
    await stopping;
    expect(await inFlight).toMatchObject({ ok: true });
    expect(await starts.startChair('IDLE', { source: 'mqtt' })).toMatchObject({ ok: false, error: 'stopping' });
  });

  it('gives up a start that outlives the drain: its vendor call is aborted, its outcome told before stop() ends, and nothing more is asked', async () => {
    const { vendor, starts, clock } = setup();
    vendor.controlMs = 60_000; // the vendor never answers in time
    vendor.abortMs = 20;
    vendor.statuses = [() => reading('IDLE', true)];
    const order: string[] = [];
    starts.on('finished', (outcome) => order.push(`finished ${outcome.ok ? 'ok' : outcome.error}`));
    const hung = starts.startChair('IDLE', { source: 'button' });
    const stopping = starts.stop().then(() => order.push('stopped'));
    await clock.advance(4_100);
    await stopping;
    // The LEDs and MQTT hear of it while they still run: they stop after the starts do.
    expect(order).toEqual(['finished stopping', 'stopped']);
    expect(await hung).toMatchObject({ ok: false, error: 'stopping' });
    expect(vendor.statusReads).toBe(0);
    expect(starts.isStarting('IDLE')).toBe(false);
  });
});

describe('MQTT start command payload', () => {
  it.each([
    ['', {}],
    ['{}', {}],
    ['{"minutes":5,"transaction":"abc"}', { minutes: 5, transaction: 'abc' }],
    ['{"transaction":42}', { transaction: 42 }],
    ['{"minutes":5,"extra":true}', { minutes: 5 }],
    ['not json', { error: 'invalid_payload' }],
    ['[1]', { error: 'invalid_payload' }],
    ['{"minutes":0}', { error: 'invalid_minutes' }],
    ['{"minutes":61,"transaction":"t1"}', { error: 'invalid_minutes', transaction: 't1' }],
    ['{"minutes":2.5}', { error: 'invalid_minutes' }],
    ['{"minutes":"5"}', { error: 'invalid_minutes' }],
    ['{"transaction":{"a":1}}', { error: 'invalid_transaction' }],
  ])('%s', (text, expected) => {
    expect(parseStartCommand(Buffer.from(text), 1, 60)).toEqual(expected);
  });
});
