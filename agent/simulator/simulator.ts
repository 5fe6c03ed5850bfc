import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { systemClock, type Clock } from '../platform/clock.js';
import { silentLogger, type Logger } from '../platform/logger.js';
import { listenOnSteadyPort } from '../platform/steady-port.js';
import { parseVendorTime } from '../time/vendor-time.js';
import { parseJsonBody, readBody, sendJson } from '../http/body.js';
import { FaultBook, parseFault, type Fault, type SimEndpoint } from './sim-faults.js';
import { SimModel, type SimChair } from './sim-model.js';
import { WebhookSender, type WebhookTarget } from './webhook-sender.js';

export interface SimulatorOptions {
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  apiKey: string;
  chairs?: number;
  location?: string;
  /** Chairs spread over these sites in turn: a vendor account that spans sites. */
  locations?: readonly string[];
  timeZone?: string;
  /** Real milliseconds per session minute (60000 = real time). */
  minuteMs?: number;
  webhook?: WebhookTarget;
  clock?: Clock;
  logger?: Logger;
  /** Called as each API request arrives, before any fault or answer (benchmarks time it). */
  onRequest?: (endpoint: SimEndpoint) => void;
  /** The most records one transaction-list request returns, whatever `limit` asks (a vendor's silent cap). */
  maxLimit?: number;
}

export const SIM_DEFAULT_API_KEY = 'sim-api-key';
export const SIM_DEFAULT_WEBHOOK_SECRET = 'sim-channel-secret';

const MAX_LIMIT = 1000;

/**
 * The vendor cloud on loopback: the four endpoints of vendor-api.md behind the Apikey check,
 * chairs whose sessions count down, transactions, signed webhooks, and fault injection that
 * tests switch on over HTTP (routes under /sim/).
 */
export class Simulator {
  readonly model: SimModel;
  readonly faults = new FaultBook();
  readonly requests: Record<SimEndpoint, number> = { lists: 0, status: 0, transactions: 0, control: 0 };
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly timeZone: string;
  private readonly sender: WebhookSender | null;
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  private boundPort: number;

  constructor(private readonly opts: SimulatorOptions) {
    this.clock = opts.clock ?? systemClock;
    this.logger = opts.logger ?? silentLogger();
    this.timeZone = opts.timeZone ?? 'Asia/Bangkok';
    this.boundPort = opts.port ?? 0;
    this.sender = opts.webhook ? new WebhookSender(opts.webhook, this.clock, this.logger) : null;
    this.model = new SimModel({
      chairs: opts.chairs ?? 4,
      location: opts.location ?? 'Ladprao Mall',
      locations: opts.locations,
      timeZone: this.timeZone,
      minuteMs: opts.minuteMs ?? 60_000,
      clock: this.clock,
      onTransaction: (record) => this.sender?.send(record),
    });
  }

  get port(): number {
    return this.boundPort;
  }

  get url(): string {
    const host = this.opts.host ?? '127.0.0.1';
    return `http://${host.includes(':') ? `[${host}]` : host}:${this.boundPort}`;
  }

  get webhooks(): WebhookSender | null {
    return this.sender;
  }

  /** Starts listening; after stop() it listens again on the same port (the uplink comes back). */
  async start(): Promise<void> {
    if (this.server) return;
    const server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        this.logger.error({ err }, 'simulator request failed');
        sendJson(res, 500, { status: 'error', code: 500, message: 'simulator error' });
      });
    });
    server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    const host = this.opts.host ?? '127.0.0.1';
    const port = this.boundPort;
    if (port) {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve();
        });
      });
    } else {
      // A port that the agent's polls, made while the uplink is cut, cannot take (steady-port.ts).
      await listenOnSteadyPort(server, host);
    }
    this.boundPort = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Stops listening and drops every connection: to a client, the vendor is gone. */
  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = null;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Stops for good: also the session timers and the webhook queue. */
  async close(): Promise<void> {
    this.model.stop();
    this.sender?.stop();
    await this.stop();
  }

  isListening(): boolean {
    return this.server !== null;
  }

  paidUse(deviceId?: string, minutes = 5): ReturnType<SimModel['start']> {
    const id = deviceId ?? [...this.model.chairs.values()].find((c) => !this.model.isRunning(c) && !c.hidden)?.deviceId;
    if (!id) return { ok: false, reason: 'busy' };
    return this.model.start(id, minutes, 'promptpay');
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://sim');
    const path = url.pathname;
    if (path.startsWith('/sim/') || path === '/sim') return this.handleAdmin(req, res, url);

    const endpoint = this.endpointOf(req.method ?? 'GET', path);
    if (!endpoint) return sendJson(res, 404, { status: 'error', code: 404, message: 'not found' });
    this.requests[endpoint] += 1;
    this.opts.onRequest?.(endpoint);
    if (req.headers['apikey'] !== this.opts.apiKey) {
      req.resume();
      return sendJson(res, 401, { status: 'error', code: 401, message: 'invalid api key' });
    }
    const fault = this.faults.take(endpoint);
    if (fault && !fault.commit) return this.applyFault(fault, req, res, () => this.answer(endpoint, req, res, url));
    if (fault) {
      // The request takes effect, then its answer is lost: the ambiguous case.
      const sink = { headersSent: false, destroyed: false, writeHead: () => sink, end: () => sink } as unknown as ServerResponse;
      await this.answer(endpoint, req, sink, url);
      return this.applyFault({ ...fault, mode: fault.mode === 'slow' ? 'timeout' : fault.mode }, req, res, async () => {});
    }
    return this.answer(endpoint, req, res, url);
  }

  private endpointOf(method: string, path: string): SimEndpoint | null {
    if (method === 'GET' && path === '/api/chair/lists') return 'lists';
    if (method === 'GET' && path.startsWith('/api/chair/status/')) return 'status';
    if (method === 'GET' && path === '/api/chair/transactions') return 'transactions';
    if (method === 'POST' && path === '/api/chair/control') return 'control';
    return null;
  }

  private async applyFault(fault: Fault, req: IncomingMessage, res: ServerResponse, normal: () => Promise<void>): Promise<void> {
    switch (fault.mode) {
      case 'error':
        return sendJson(res, fault.status ?? 500, { status: 'error', code: fault.status ?? 500, message: 'injected error' });
      case 'rate-limit':
        return sendJson(res, 429, { status: 'error', code: 429, message: 'too many requests' }, {
          'retry-after': String(fault.retryAfterSeconds ?? 1),
        });
      case 'malformed':
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.end('{"status":"success","code":200,"data":[{"DeviceId":');
      case 'bad-envelope':
        return sendJson(res, 200, { status: 'error', code: 500, message: 'internal error' });
      case 'reset':
        req.socket.destroy();
        return;
      case 'timeout': {
        const hold = fault.delayMs ?? 120_000;
        await new Promise<void>((resolve) => {
          const t = this.clock.setTimeout(resolve, hold);
          req.socket.once('close', () => {
            t.cancel();
            resolve();
          });
        });
        req.socket.destroy();
        return;
      }
      case 'slow':
        await this.clock.sleep(fault.delayMs ?? 2_000);
        return normal();
    }
  }

  private async answer(endpoint: SimEndpoint, req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const ok = (data: unknown): void => sendJson(res, 200, { status: 'success', code: 200, data });
    switch (endpoint) {
      case 'lists':
        return ok([...this.model.chairs.values()].filter((c) => !c.hidden).map((c) => this.model.listEntry(c)));
      case 'status': {
        const id = decodeURIComponent(url.pathname.slice('/api/chair/status/'.length));
        const chair = this.model.chairs.get(id);
        if (!chair || chair.hidden) return sendJson(res, 404, { status: 'error', code: 404, message: 'device not found' });
        return ok({ DeviceId: chair.deviceId, ...this.model.chairState(chair) });
      }
      case 'transactions':
        return this.answerTransactions(res, url);
      case 'control':
        return this.answerControl(req, res);
    }
  }

  private answerTransactions(res: ServerResponse, url: URL): void {
    const q = url.searchParams;
    const from = this.readTime(q.get('from'));
    const to = this.readTime(q.get('to'));
    if (from === undefined || to === undefined) {
      return sendJson(res, 400, { status: 'error', code: 400, message: 'from/to not understood' });
    }
    const limit = Math.min(this.opts.maxLimit ?? MAX_LIMIT, Math.max(1, Number(q.get('limit') ?? 20) || 20));
    const offset = Math.max(0, Number(q.get('offset') ?? 0) || 0);
    const data = this.model.queryTransactions(from, to, q.get('order') ?? 'chronological', offset, limit);
    sendJson(res, 200, { status: 'success', code: 200, data });
  }

  /** from/to in any of the formats the agent can send; null when absent, undefined when unreadable. */
  private readTime(text: string | null): number | null | undefined {
    if (text === null || text === '') return null;
    if (/^\d{13}$/.test(text)) return Number(text);
    if (/^\d{9,10}$/.test(text)) return Number(text) * 1000;
    const local = parseVendorTime(text, this.timeZone);
    if (local !== null) return local;
    const iso = Date.parse(text);
    return Number.isNaN(iso) ? undefined : iso;
  }

  private async answerControl(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = parseJsonBody(await readBody(req, 64 * 1024)) as Record<string, unknown> | undefined;
    const deviceId = body?.['DeviceId'];
    const time = body?.['Time'];
    const minutes = typeof time === 'string' && /^\d+$/.test(time) ? Number(time) : typeof time === 'number' ? time : NaN;
    if (typeof deviceId !== 'string' || !Number.isInteger(minutes) || minutes < 1 || minutes > 99) {
      return sendJson(res, 400, { status: 'error', code: 400, message: 'DeviceId and Time (1-99) are required' });
    }
    const outcome = this.model.start(deviceId, minutes, 'manual');
    if (!outcome.ok && outcome.reason === 'not_found') return sendJson(res, 404, { status: 'error', code: 404, message: 'device not found' });
    if (!outcome.ok) return sendJson(res, 409, { status: 'error', code: 409, message: 'device is busy' });
    sendJson(res, 200, {});
  }

  private async handleAdmin(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const method = req.method ?? 'GET';
    const body = method === 'GET' || method === 'DELETE' ? undefined : parseJsonBody(await readBody(req, 64 * 1024));
    const input = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
    const path = url.pathname;
    if (method === 'GET' && path === '/sim/state') return sendJson(res, 200, this.snapshot());
    if (method === 'POST' && path === '/sim/faults') {
      const fault = parseFault(body);
      if (typeof fault === 'string') return sendJson(res, 400, { error: fault });
      this.faults.add(fault);
      return sendJson(res, 200, { faults: this.faults.list() });
    }
    if (method === 'DELETE' && path === '/sim/faults') {
      this.faults.clear();
      return sendJson(res, 200, { faults: [] });
    }
    if (method === 'POST' && path === '/sim/paid') {
      const minutes = typeof input['minutes'] === 'number' ? input['minutes'] : 5;
      const outcome = this.paidUse(typeof input['deviceId'] === 'string' ? input['deviceId'] : undefined, minutes);
      if (!outcome.ok) return sendJson(res, outcome.reason === 'not_found' ? 404 : 409, { error: outcome.reason });
      return sendJson(res, 200, outcome.transaction);
    }
    if (method === 'POST' && path === '/sim/transactions') {
      const count = typeof input['count'] === 'number' ? Math.min(100_000, Math.max(0, Math.floor(input['count']))) : 10;
      const spreadMinutes = typeof input['spreadMinutes'] === 'number' ? input['spreadMinutes'] : 60;
      const added = this.model.backfill(count, spreadMinutes * 60_000, typeof input['deviceId'] === 'string' ? input['deviceId'] : undefined);
      return sendJson(res, 200, { added, total: this.model.transactions.length });
    }
    const chairRoute = /^\/sim\/chairs\/([^/]+)$/.exec(path);
    if (method === 'POST' && chairRoute) {
      const chair = this.model.chairs.get(decodeURIComponent(chairRoute[1] ?? ''));
      if (!chair) return sendJson(res, 404, { error: 'no such chair' });
      this.overrideChair(chair, input);
      return sendJson(res, 200, this.model.listEntry(chair));
    }
    sendJson(res, 404, { error: 'no such simulator route' });
  }

  private overrideChair(chair: SimChair, input: Record<string, unknown>): void {
    if ('status' in input) chair.statusOverride = typeof input['status'] === 'string' ? input['status'] : null;
    if ('seated' in input) chair.seatedOverride = typeof input['seated'] === 'boolean' ? input['seated'] : null;
    if ('hidden' in input) chair.hidden = input['hidden'] === true;
    if (input['stop'] === true) chair.sessionEndsAt = null;
  }

  snapshot(): Record<string, unknown> {
    return {
      chairs: [...this.model.chairs.values()].map((c) => ({ ...this.model.listEntry(c), hidden: c.hidden })),
      transactions: this.model.transactions.length,
      faults: this.faults.list(),
      requests: this.requests,
      webhooks: this.sender ? { sent: this.sender.sent, failed: this.sender.failed } : null,
    };
  }
}
