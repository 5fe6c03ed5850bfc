import type { IncomingMessage, ServerResponse } from 'node:http';
import { backlogFigures, type StatusSources } from '../observe/agent-status.js';
import type { Timer } from '../platform/clock.js';
import type { Component } from '../platform/component.js';
import { chairLedName, type Indicators } from '../gpio/indicators.js';
import type { LedController } from '../gpio/leds.js';
import { chairLedPattern } from '../core/led-patterns.js';
import { formatIsoWithOffset } from '../time/vendor-time.js';
import { errorMessage } from '../platform/errors.js';
import type { Logger } from '../platform/logger.js';
import type { StartOutcome, StartService } from '../start/start-service.js';
import { agentVersion } from '../platform/version.js';
import { parseJsonBody, readBody, sendJson, sendText } from './body.js';
import { AdminGuard } from './admin-guard.js';
import type { ClientAddress } from './client-address.js';
import { EventStreams } from './event-streams.js';
import type { RefusalLog } from '../observe/refusal-log.js';
import type { HttpListener } from './listener.js';
import { STATUS_PAGE_HTML } from './status-page-html.js';

/** Page viewers at once; a viewer past this is answered 503 (the Pi is not a web server). */
export const MAX_VIEWERS = 16;
const EVENTS_KEPT = 50;
/** Changes are pushed at most this often; a running chair changes at every poll. */
const PUSH_EVERY_MS = 250;
/** A comment line keeps proxies and the browser from timing the stream out, and finds dead viewers. */
const HEARTBEAT_MS = 15_000;
const LED_WALK_MS = 800;

/**
 * The page is self-contained (inline style and script, no other origin): nothing else may load,
 * and no other site may frame it (a click on Start under someone else's page), but the ones
 * http.embedOrigins names (a Home Assistant dashboard's webpage card, a signage player).
 */
export function pageHeaders(embedOrigins: readonly string[]): Record<string, string> {
  const ancestors = embedOrigins.length === 0 ? "'none'" : ["'self'", ...embedOrigins.map((o) => new URL(o).origin)].join(' ');
  return {
    'content-security-policy': `default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors ${ancestors}`,
    // X-Frame-Options cannot name an origin: browsers that read CSP go by frame-ancestors.
    ...(embedOrigins.length === 0 ? { 'x-frame-options': 'DENY' } : {}),
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
  };
}

export interface StatusPageDeps extends StatusSources {
  /** http.adminToken: unlocks the page's actions. */
  adminToken: string | undefined;
  /** The minutes a start from the page may ask for (start.minMinutes/maxMinutes), and its default (vendor.sessionMinutes). */
  startMinutes: { min: number; max: number; default: number };
  starts: StartService;
  leds: LedController;
  indicators: Indicators;
  logger: Logger;
  /** The listener's refusal log: admin-token refusals are summed up with the others. */
  httpRefusals: RefusalLog;
  /** Who a request is from (http.trustedProxies: behind the site's reverse proxy, X-Forwarded-For). */
  clientAddress?: ClientAddress;
  /** http.embedOrigins: the sites that may show the page in a frame. */
  embedOrigins?: readonly string[];
}

/** Live viewers: how many, per address, how long, how far behind (event-streams.ts). */
const STREAM_LIMITS = { max: MAX_VIEWERS, perClient: 4, lifetimeMs: 10 * 60_000, maxBacklogBytes: 256 * 1024 };

/**
 * The local status page (GET /): chairs with status, remaining time, what their LED shows and
 * availability; backlog and health; the last events. Live over server-sent events (GET /events),
 * one self-contained page (no external assets: the site may be offline), fits a phone.
 * Read-only unless http.adminToken is set: then the token (Authorization: Bearer) unlocks
 * POST /api/chairs/<id>/start and POST /api/leds/walk (the wiring test's LED walk).
 */
export class StatusPage implements Component {
  readonly name = 'status-page';
  private readonly viewers: EventStreams;
  private readonly events: { at: string; text: string }[] = [];
  private pushTimer: Timer | null = null;
  private heartbeat: Timer | null = null;
  private walking = false;
  private walkTimer: Timer | null = null;
  private readonly admin: AdminGuard;

  constructor(private readonly deps: StatusPageDeps) {
    this.admin = new AdminGuard(deps.adminToken, () => deps.clock.monotonic(), deps.clientAddress);
    this.viewers = new EventStreams(STREAM_LIMITS, deps.clock, (remote, why) => deps.logger.debug({ remote, why }, 'status page viewer dropped'), deps.clientAddress);
  }

  /** The page's routes; registered once, served while the listener runs. */
  routes(http: HttpListener): void {
    const headers = pageHeaders(this.deps.embedOrigins ?? []);
    http.route('GET', '/', (_req, res) => sendText(res, 200, STATUS_PAGE_HTML, 'text/html; charset=utf-8', headers));
    http.route('GET', '/api/status', (_req, res) => sendJson(res, 200, this.snapshot()));
    http.route('GET', '/events', (req, res) => this.subscribe(req, res), 'stream');
    http.route('POST', /^\/api\/chairs\/([^/]+)\/start$/, (req, res) => this.startChair(req, res));
    // The page asks before it enables its actions: they look usable only once the token is accepted.
    http.route('POST', '/api/admin/check', (req, res) => {
      req.resume();
      if (this.authorised(req, res)) sendJson(res, 200, { status: 'ok' });
    });
    http.route('POST', '/api/leds/walk', (req, res) => this.walk(req, res));
  }

  /** Each chair's last state line: a poll that changes only the remaining time adds no event. */
  private readonly lastState = new Map<string, string>();
  private readonly onState = (s: { deviceId: string; status: string; running: boolean }): void => {
    const text = `${s.deviceId}: ${s.status}${s.running && !/running/i.test(s.status) ? ' (running)' : ''}`;
    if (this.lastState.get(s.deviceId) === text) return;
    this.lastState.set(s.deviceId, text);
    this.event(text);
  };
  private readonly onAvailability = (id: string, online: boolean): void => this.event(`${id} ${online ? 'available' : 'unavailable'}`);
  private readonly onStarting = (id: string, minutes: number, request: { source: string }): void => this.event(`${id}: start requested (${minutes} min, ${request.source})`);
  private readonly onFinished = (o: StartOutcome): void => this.event(o.ok ? `${o.deviceId} started (${o.minutes} min)` : `${o.deviceId} not started: ${o.error}`);
  private readonly onInserted = (n: number): void => this.event(`${n} transaction record(s) stored`);
  private readonly onHealth = (): void => this.pushSoon();

  start(): void {
    const { registry, starts, outbox, health } = this.deps;
    registry.on('state', this.onState);
    registry.on('availability', this.onAvailability);
    starts.on('starting', this.onStarting);
    starts.on('finished', this.onFinished);
    outbox.on('inserted', this.onInserted);
    outbox.on('delivered', this.onHealth);
    health.on('change', this.onHealth);
    this.heartbeat = this.deps.clock.setInterval(() => {
      this.viewers.broadcast(': keep-alive\n\n');
    }, HEARTBEAT_MS);
  }

  stop(): void {
    const { registry, starts, outbox, health } = this.deps;
    registry.off('state', this.onState);
    registry.off('availability', this.onAvailability);
    starts.off('starting', this.onStarting);
    starts.off('finished', this.onFinished);
    outbox.off('inserted', this.onInserted);
    outbox.off('delivered', this.onHealth);
    health.off('change', this.onHealth);
    this.heartbeat?.cancel();
    this.pushTimer?.cancel();
    this.walkTimer?.cancel();
    this.heartbeat = this.pushTimer = this.walkTimer = null;
    this.walking = false;
    this.lastState.clear();
    this.viewers.closeAll();
  }

  private event(text: string): void {
    this.events.push({ at: formatIsoWithOffset(this.deps.clock.now(), this.deps.site.timeZone), text: text.slice(0, 300) });
    if (this.events.length > EVENTS_KEPT) this.events.shift();
    this.pushSoon();
  }

  private pushSoon(): void {
    if (this.viewers.size === 0 || this.pushTimer) return;
    this.pushTimer = this.deps.clock.setTimeout(() => {
      this.pushTimer = null;
      const data = `event: snapshot\ndata: ${JSON.stringify(this.snapshot())}\n\n`;
      this.viewers.broadcast(data);
    }, PUSH_EVERY_MS);
  }

  snapshot(): Record<string, unknown> {
    const { registry, health, site, leds, starts, broker } = this.deps;
    const chairs = registry.views().map((v) => {
      const s = v.state;
      const led = chairLedPattern({ online: v.online, running: s?.running ?? false, startable: s?.startable ?? false, starting: starts.isStarting(v.deviceId) });
      return {
        deviceId: v.deviceId,
        name: s?.deviceName ?? null,
        location: s?.location ?? null,
        status: s?.status ?? null,
        running: s?.running ?? false,
        seated: s?.seated ?? false,
        remainingSeconds: s?.remainingSeconds ?? null,
        startable: (s?.startable ?? false) && v.online,
        online: v.online,
        led,
        ledWired: leds.shown(chairLedName(v.deviceId)) !== null,
      };
    });
    const snap = health.snapshot();
    return {
      site: site.siteId,
      version: agentVersion(),
      health: snap.status,
      checks: Object.fromEntries(Object.entries(snap.checks).map(([k, c]) => [k, { ok: c.ok, detail: c.detail }])),
      broker: broker.connected,
      backlog: backlogFigures(this.deps),
      chairs,
      today: this.deps.today(),
      events: [...this.events].reverse(),
      admin: this.admin.configured,
      startMinutes: this.deps.startMinutes,
    };
  }

  private subscribe(req: IncomingMessage, res: ServerResponse): void {
    this.viewers.open(req, res, `retry: 2000\nevent: snapshot\ndata: ${JSON.stringify(this.snapshot())}\n\n`);
  }

  /**
   * 403 when no token is configured (read-only page), 401 when it is missing or wrong, 429 when
   * this address guessed wrong too often. Refusals are summed up like bad webhook signatures
   * (one line, then a summary a minute); the path is logged without its query string, so no
   * part of a token put in a URL reaches a log line.
   */
  private authorised(req: IncomingMessage, res: ServerResponse): boolean {
    const verdict = this.admin.check(req);
    if (verdict.ok) return true;
    const path = (req.url ?? '').split('?')[0]?.slice(0, 100);
    if (verdict.status === 403) {
      sendJson(res, 403, { error: 'read-only: set http.adminToken to allow actions from this page' });
    } else if (verdict.status === 429) {
      this.deps.httpRefusals.note('admin', '429', 'status page action refused: too many wrong admin tokens from this address', { remote: req.socket.remoteAddress, path });
      sendJson(res, 429, { error: 'too many wrong tokens: try again later' }, { 'retry-after': String(verdict.retryAfterSeconds ?? 60) });
    } else {
      this.deps.httpRefusals.note('admin', '401', 'status page action without a valid admin token; refused', { remote: req.socket.remoteAddress, path });
      sendJson(res, 401, { error: 'a valid admin token is required' }, { 'www-authenticate': 'Bearer' });
    }
    return false;
  }

  private async startChair(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!this.authorised(req, res)) {
      req.resume();
      return;
    }
    // {"minutes":N} is honoured within start.minMinutes..maxMinutes; none means the chair's own.
    let body: Buffer;
    try {
      body = await readBody(req, 1024);
    } catch {
      return sendJson(res, 413, { error: 'a start request is at most 1 KiB' });
    }
    const asked = body.length === 0 ? {} : parseJsonBody(body);
    const minutes = asked && typeof asked === 'object' ? (asked as { minutes?: unknown }).minutes : undefined;
    const { min: minMinutes, max: maxMinutes } = this.deps.startMinutes;
    if (minutes !== undefined && (!Number.isInteger(minutes) || (minutes as number) < minMinutes || (minutes as number) > maxMinutes)) {
      return sendJson(res, 400, { error: `minutes must be a whole number from ${minMinutes} to ${maxMinutes}` });
    }
    const level = /^\/api\/chairs\/([^/]+)\/start$/.exec((req.url ?? '').split('?')[0] ?? '')?.[1] ?? '';
    let deviceId: string;
    try {
      deviceId = decodeURIComponent(level);
    } catch {
      return sendJson(res, 400, { error: 'bad chair id' });
    }
    if (!this.deps.registry.knownIds().includes(deviceId)) return sendJson(res, 404, { error: `no chair ${deviceId.slice(0, 64)}` });
    try {
      const outcome = await this.deps.starts.startChair(deviceId, { source: 'page', minutes: minutes as number | undefined });
      sendJson(res, outcome.ok ? 200 : 409, outcome.ok ? { status: 'ok', minutes: outcome.minutes } : { status: 'error', error: outcome.error, message: outcome.message });
    } catch (err) {
      sendJson(res, 500, { status: 'error', error: errorMessage(err) });
    }
  }

  private walk(req: IncomingMessage, res: ServerResponse): void {
    req.resume();
    if (!this.authorised(req, res)) return;
    if (this.walking) return sendJson(res, 409, { error: 'an LED walk is under way' });
    const names = this.deps.leds.names();
    if (names.length === 0) return sendJson(res, 200, { leds: [] });
    this.walking = true;
    this.event('LED walk started from the status page');
    let i = 0;
    const step = (): void => {
      for (const n of names) this.deps.leds.set(n, n === names[i] ? 'on' : 'off');
      i += 1;
      if (i <= names.length) {
        this.walkTimer = this.deps.clock.setTimeout(step, LED_WALK_MS);
        return;
      }
      this.walking = false;
      this.walkTimer = null;
      this.deps.indicators.refresh();
      this.event('LED walk done');
    };
    step();
    sendJson(res, 202, { leds: names, stepMs: LED_WALK_MS });
  }
}
