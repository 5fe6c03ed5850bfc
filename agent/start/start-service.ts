import { EventEmitter } from 'node:events';
import { within, type Clock, type Timer } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../observe/metrics.js';
import { errorMessage } from '../platform/errors.js';
import type { ChairRegistry } from '../core/chair-registry.js';
import { checkStart, REFUSAL_TEXT, type StartRefusal } from '../core/start-rules.js';
import { VendorError } from '../vendor/errors.js';
import type { ChairReading, VendorApi } from '../vendor/vendor-api.js';
import type { Component } from '../platform/component.js';

/** How long stop() waits, after aborting, for a given-up start to end. */
const ABORTED_SETTLE_MS = 1_000;

export type StartSource = 'button' | 'mqtt' | 'cli' | 'page';

export type StartError =
  | StartRefusal
  | 'vendor_refused'
  | 'vendor_unauthorized'
  | 'vendor_unreachable'
  | 'vendor_timeout'
  | 'not_confirmed'
  | 'stopping';

export interface StartRequest {
  minutes?: number | undefined;
  source: StartSource;
  /** The caller's own reference (a POS transaction), echoed and remembered for correlation. */
  transaction?: string | number | undefined;
}

export type StartOutcome =
  | { ok: true; deviceId: string; minutes: number }
  | { ok: false; deviceId: string; error: StartError; message: string };

export interface StartEvents {
  starting: [deviceId: string, minutes: number, request: StartRequest];
  finished: [outcome: StartOutcome, request: StartRequest];
}

export interface StartServiceDeps {
  vendor: VendorApi;
  registry: ChairRegistry;
  clock: Clock;
  logger: Logger;
  metrics?: Metrics;
  /** Minutes for a chair when the request names none. */
  minutesFor: (deviceId: string) => number;
  confirmTimeoutMs: number;
  confirmIntervalMs: number;
  /** After an unknown outcome, how long further starts of the chair are refused (unless it is listed idle or running). */
  unknownHoldMs?: number;
  /** How long stop() waits for a start under way. */
  drainMs?: number;
}

/**
 * Starting a chair, whoever asks. A start that the rules refuse never reaches the vendor;
 * an accepted one makes exactly one control call, never retried. When that call's fate is
 * unknown (timeout, reset, 5xx) the chair's status tells whether it started. After a
 * successful call the status is read until the chair reports running, for a bounded time.
 */
export class StartService extends EventEmitter<StartEvents> implements Component {
  readonly name = 'starts';
  private readonly inFlight = new Map<string, Promise<StartOutcome>>();
  /**
   * Chairs whose last start has an unknown outcome (the vendor may yet report it running): no
   * control call for them until a chair list shows them idle or running, or the hold runs out,
   * so a POS that retries after its own timeout cannot start a chair twice.
   */
  private readonly unsettled = new Map<string, Timer>();
  private readonly onListed = (): void => {
    for (const [id, timer] of this.unsettled) {
      const state = this.deps.registry.view(id)?.state;
      if (!state || (!state.running && !state.startable)) continue;
      timer.cancel();
      this.unsettled.delete(id);
      this.deps.logger.info({ deviceId: id, running: state.running }, `the vendor lists the chair ${state.running ? 'running' : 'idle'}: its earlier start is settled`);
    }
  };
  private stopping = false;
  /** Aborts the vendor calls of starts still under way when the drain time runs out. */
  private abort = new AbortController();

  constructor(private readonly deps: StartServiceDeps) {
    super();
  }

  start(): void {
    this.stopping = false;
    this.abort = new AbortController();
    this.deps.registry.on('listed', this.onListed);
  }

  /** Refuses new starts and lets those under way finish (bounded). */
  async stop(): Promise<void> {
    this.stopping = true;
    this.deps.registry.off('listed', this.onListed);
    for (const timer of this.unsettled.values()) timer.cancel();
    this.unsettled.clear();
    if (this.inFlight.size === 0) return;
    this.deps.logger.info({ chairs: [...this.inFlight.keys()] }, 'waiting for starts under way');
    const settled = (): Promise<unknown> => Promise.allSettled(this.inFlight.values());
    if (await within(this.deps.clock, settled(), this.deps.drainMs ?? 4_000)) return;
    // A start that outlives the drain is given up: its vendor calls end now, not after the agent.
    // Its outcome ('stopping') is logged and told (LEDs, MQTT) before the components after this
    // one stop and the log is closed; an aborted call ends at once, so this wait is short.
    this.abort.abort();
    await within(this.deps.clock, settled(), ABORTED_SETTLE_MS);
  }

  isStarting(deviceId: string): boolean {
    return this.inFlight.has(deviceId);
  }

  async startChair(deviceId: string, request: StartRequest): Promise<StartOutcome> {
    const log = this.deps.logger.child({ deviceId, source: request.source });
    if (this.stopping) return this.refused(log, request, deviceId, 'stopping', 'the agent is stopping');
    const refusal = checkStart(this.deps.registry.view(deviceId), this.inFlight.has(deviceId), this.unsettled.has(deviceId));
    if (refusal) return this.refused(log, request, deviceId, refusal, REFUSAL_TEXT[refusal]);
    const minutes = request.minutes ?? this.deps.minutesFor(deviceId);
    // In flight until its outcome is logged and told, so stop() waits for that too.
    const done = this.finish(deviceId, request, this.run(deviceId, minutes, log), log);
    this.inFlight.set(deviceId, done);
    this.emit('starting', deviceId, minutes, request);
    log.info({ minutes }, 'starting chair');
    return done;
  }

  private async finish(deviceId: string, request: StartRequest, run: Promise<StartOutcome>, log: Logger): Promise<StartOutcome> {
    let outcome: StartOutcome;
    try {
      outcome = await run;
    } finally {
      this.inFlight.delete(deviceId);
    }
    this.deps.metrics?.starts.inc({ source: request.source, outcome: outcome.ok ? 'ok' : outcome.error });
    if (outcome.ok) log.info({ minutes: outcome.minutes }, 'chair started');
    else if (outcome.error === 'not_confirmed') {
      this.holdUnsettled(deviceId, log);
      log.warn({ error: outcome.error, reason: outcome.message }, 'chair start outcome unknown');
    } else log.warn({ error: outcome.error, reason: outcome.message }, 'chair start failed');
    this.emit('finished', outcome, request);
    return outcome;
  }

  private holdUnsettled(deviceId: string, log: Logger): void {
    const holdMs = this.deps.unknownHoldMs ?? 120_000;
    if (holdMs <= 0 || this.stopping) return;
    this.unsettled.get(deviceId)?.cancel();
    this.unsettled.set(
      deviceId,
      this.deps.clock.setTimeout(() => {
        this.unsettled.delete(deviceId);
        log.info({ holdSeconds: holdMs / 1000 }, 'the earlier start of this chair is still unknown after the hold; starts are allowed again');
      }, holdMs),
    );
  }

  /** A start the rules refused: no control call was made. */
  private refused(log: Logger, request: StartRequest, deviceId: string, error: StartError, message: string): StartOutcome {
    const outcome: StartOutcome = { ok: false, deviceId, error, message };
    this.deps.metrics?.starts.inc({ source: request.source, outcome: error });
    log.info({ error, reason: message }, 'start refused, no control call made');
    // A start already under way shows itself (fast blink); any other refusal is a failed start.
    if (error !== 'start_in_flight' && error !== 'stopping') this.emit('finished', outcome, request);
    return outcome;
  }

  private async run(deviceId: string, minutes: number, log: Logger): Promise<StartOutcome> {
    const fail = (error: StartError, message: string): StartOutcome => ({ ok: false, deviceId, error, message });
    const signal = this.abort.signal;
    try {
      await this.deps.vendor.control(deviceId, minutes, { signal });
    } catch (err) {
      if (signal.aborted) return fail('stopping', 'the agent stopped before the vendor answered');
      if (!(err instanceof VendorError)) return fail('vendor_unreachable', errorMessage(err));
      if (err.ambiguous) {
        // The vendor may have acted on it (the answer was lost): the chair's status settles it.
        log.warn({ code: err.code, err: err.message }, 'control call outcome unknown; the chair is held as starting while its status is read');
        return this.settleUnknown(deviceId, minutes, err, log);
      }
      switch (err.code) {
        case 'VENDOR_UNAUTHORIZED':
          return fail('vendor_unauthorized', err.message);
        case 'VENDOR_NOT_FOUND':
          return fail('unknown_chair', 'the vendor does not know this chair');
        case 'VENDOR_UNREACHABLE':
          return fail('vendor_unreachable', err.message);
        case 'VENDOR_TIMEOUT':
          return fail('vendor_timeout', err.message);
        default:
          return fail('vendor_refused', err.message);
      }
    }
    return this.confirm(deviceId, minutes, log);
  }

  /**
   * After a control call whose fate is unknown: the status is read for the confirm window while
   * the chair stays "starting" (other starts of it are refused, so a POS retry cannot start it a
   * second time). Running: it started. Reading idle at the end of the window: it did not.
   * Neither (no answer, or another status): not confirmed, never "did not start".
   */
  private async settleUnknown(deviceId: string, minutes: number, cause: VendorError, log: Logger): Promise<StartOutcome> {
    const { clock, confirmTimeoutMs, confirmIntervalMs } = this.deps;
    const deadline = clock.monotonic() + confirmTimeoutMs;
    let idle = false;
    for (;;) {
      const reading = await this.readStatus(deviceId, log, 0);
      if (reading) {
        const state = this.deps.registry.applyReading(reading);
        if (state.running) return { ok: true, deviceId, minutes };
        idle = state.startable;
      }
      if (this.abort.signal.aborted) return { ok: false, deviceId, error: 'stopping', message: 'the agent stopped before the outcome of the start was known' };
      const left = deadline - clock.monotonic();
      if (left <= 0) break;
      await clock.sleep(Math.min(confirmIntervalMs, left), this.abort.signal).catch(() => undefined);
    }
    const seconds = confirmTimeoutMs / 1000;
    if (idle) {
      return {
        ok: false,
        deviceId,
        error: cause.code === 'VENDOR_TIMEOUT' ? 'vendor_timeout' : 'vendor_unreachable',
        message: `${cause.message}; the chair still reads idle after ${seconds} s, so it most likely did not start`,
      };
    }
    return {
      ok: false,
      deviceId,
      error: 'not_confirmed',
      message: `${cause.message}; the vendor may have started the chair, but it has not reported running (nor idle) within ${seconds} s: no new start of it until the vendor lists it idle or running`,
    };
  }

  /** Reads the status until the chair reports running, for at most confirmTimeoutMs. */
  private async confirm(deviceId: string, minutes: number, log: Logger): Promise<StartOutcome> {
    const { clock, confirmTimeoutMs, confirmIntervalMs } = this.deps;
    const deadline = clock.monotonic() + confirmTimeoutMs;
    for (;;) {
      // No retries inside a read: this loop is the retry.
      const reading = await this.readStatus(deviceId, log, 0);
      if (reading && this.deps.registry.applyReading(reading).running) return { ok: true, deviceId, minutes };
      if (this.abort.signal.aborted) return { ok: false, deviceId, error: 'stopping', message: 'the agent stopped before the chair reported running' };
      const left = deadline - clock.monotonic();
      if (left <= 0) {
        return { ok: false, deviceId, error: 'not_confirmed', message: `the vendor accepted the start but the chair has not reported running within ${confirmTimeoutMs / 1000} s; it may yet` };
      }
      await clock.sleep(Math.min(confirmIntervalMs, left), this.abort.signal).catch(() => undefined);
    }
  }

  private async readStatus(deviceId: string, log: Logger, retries?: number): Promise<ChairReading | null> {
    const signal = this.abort.signal;
    if (signal.aborted) return null;
    try {
      return await this.deps.vendor.chairStatus(deviceId, retries === undefined ? { signal } : { retries, signal });
    } catch (err) {
      if (!signal.aborted) log.warn({ err: errorMessage(err) }, 'chair status read failed');
      return null;
    }
  }
}
