import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';

// Not `import { createServer } from 'node:http'`: the ESM view of node:http reads every export,
// and its lazy WebSocket getters load Node's own copy of undici (about 20 ms at each start).
const require = createRequire(import.meta.url);
const { createServer } = require('node:http') as typeof import('node:http');
import type { AddressInfo, Socket } from 'node:net';
import { connectionTable, type Admission } from './admission.js';
import type { Clock } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../observe/metrics.js';
import { AgentError, errorCode, errorMessage } from '../platform/errors.js';
import type { Component } from '../platform/component.js';
import { sendJson } from './body.js';
import { RefusalLog } from '../observe/refusal-log.js';
import type { Server as HttpsServer } from 'node:https';
import type { CertificateStatus, ServedCertificate } from './served-certificate.js';
import type { TlsPair } from '../platform/tls-files.js';

export type RouteHandler = (req: IncomingMessage, res: ServerResponse, match: RegExpExecArray | null) => Promise<void> | void;

/** What a route is, for who gives way when connections run short (admission.ts). */
export type RouteClass = 'webhook' | 'stream' | 'other';

interface Route {
  method: string;
  path: string | RegExp;
  handler: RouteHandler;
  routeClass: RouteClass;
}


export interface ListenerOptions {
  /** The component's name in logs and start-up order; `http` unless given. */
  name?: string;
  host: string;
  port: number;
  /** What its log lines call it; `HTTP listener` unless given. */
  label?: string;
  /** The config keys that set host and port, named when listening fails; `http.host/http.port` unless given. */
  configKeys?: string;
  logger: Logger;
  /** A client must send its headers within this time. */
  headersTimeoutMs?: number;
  /** ...and the whole request within this one. */
  requestTimeoutMs?: number;
  /** A connection silent this long is closed, also one that never sends a byte. */
  idleTimeoutMs?: number;
  /**
   * Connections open at once before the quietest give way to new ones and requests other than
   * the webhook are shed with 503; four times this is the hard limit.
   */
  maxConnections?: number;
  /**
   * The connection table this listener shares with the agent's others, so that
   * `maxConnections` bounds them together; one of its own when not given.
   */
  connections?: Admission;
  clock: Clock;
  metrics?: Metrics;
  /** Serve HTTPS with this certificate, picked up again when its files change. */
  certificate?: ServedCertificate;
}

/**
 * An HTTP listener of the agent: the one for the webhook, health, metrics, the status page and
 * simulated GPIO, and with `webhook.port` a second one for the webhook alone. Short header and
 * request timeouts, checked every second, an idle timeout that also closes connections that never
 * send a byte, and a cap on open connections, so slow or silent clients cannot starve the
 * webhook. Refusals are logged by a RefusalLog (a flood is one line a minute).
 */
export class HttpListener implements Component {
  readonly name: string;
  private server: Server | null = null;
  /** The same server when it serves TLS, for a renewed certificate. */
  private secure: HttpsServer | null = null;
  private stopped = false;
  private readonly routes: Route[] = [];
  private admission: Admission | null = null;
  readonly refusals: RefusalLog;

  constructor(private readonly opts: ListenerOptions) {
    this.name = opts.name ?? 'http';
    this.refusals = new RefusalLog({ clock: opts.clock, logger: opts.logger, metrics: opts.metrics });
  }

  route(method: string, path: string | RegExp, handler: RouteHandler, routeClass: RouteClass = 'other'): void {
    this.routes.push({ method, path, handler, routeClass });
  }

  async start(): Promise<void> {
    this.stopped = false;
    const certificate = this.opts.certificate;
    if (!certificate) return this.listen(null);
    let pair: TlsPair;
    try {
      pair = certificate.load();
    } catch (err) {
      // Files a renewal botched must not stop the agent at its next start (a reboot, an upgrade):
      // buttons, polls and delivery run, and the vendor's records come in through the transaction
      // sync until this port serves.
      this.notStarted(err);
      certificate.start((p) => this.serveCertificate(p));
      return;
    }
    await this.listen(pair);
    certificate.start((p) => this.serveCertificate(p));
  }

  /** A pair that loaded: the running server gives it to new connections, or starts with it. */
  private serveCertificate(pair: TlsPair): void {
    if (this.secure) {
      this.secure.setSecureContext({ cert: pair.cert, key: pair.key });
      return;
    }
    this.listen(pair).catch((err: unknown) => this.notStarted(err, 'its certificate loaded, but it could not listen'));
  }

  private notStarted(err: unknown, then = 'it starts once its certificate files load (looked at every minute)'): void {
    this.opts.logger.error({ code: errorCode(err), err: errorMessage(err) }, `${this.opts.label ?? 'HTTP listener'} not started: ${errorMessage(err)}; ${then}`);
  }

  private async listen(pair: TlsPair | null): Promise<void> {
    const options = {
      headersTimeout: this.opts.headersTimeoutMs ?? 5_000,
      requestTimeout: this.opts.requestTimeoutMs ?? 10_000,
      keepAliveTimeout: 5_000,
      connectionsCheckingInterval: 1_000,
    };
    const handler = (req: IncomingMessage, res: ServerResponse): void => void this.dispatch(req, res);
    let server: Server;
    let secure: HttpsServer | null = null;
    if (pair) {
      // Loaded only here: a box without TLS on a listener never pays for node:https.
      const https = require('node:https') as typeof import('node:https');
      // A handshake is held to the header timeout: a client that connects and says nothing
      // would otherwise keep its slot for TLS's default two minutes.
      server = secure = https.createServer({ ...options, cert: pair.cert, key: pair.key, handshakeTimeout: options.headersTimeout }, handler);
      secure.on('tlsClientError', (err: Error, socket: Socket) => {
        this.refusals.note('http', 'tls', 'TLS handshake failed; connection closed', { remote: socket.remoteAddress, err: errorMessage(err) });
      });
    } else {
      server = createServer(options, handler);
    }
    server.timeout = this.opts.idleTimeoutMs ?? 10_000;
    const soft = this.opts.maxConnections ?? 64;
    const admission = (this.admission ??= this.opts.connections ?? connectionTable(soft, () => this.opts.clock.monotonic()));
    const onEvict = (remote: string, use: string): void =>
      this.refusals.note('http', 'evicted', `connection closed to make room (${use}): more than ${soft} connections open (http.maxConnections)`, { remote });
    server.on('connection', (socket: Socket) => {
      if (admission.admit(socket, onEvict)) return;
      socket.destroy();
      this.refusals.note('http', 'dropped', `connection refused: ${admission.size} connections open, all of them busy`, { remote: socket.remoteAddress });
    });
    server.on('clientError', (err, socket) => {
      const timedOut = errorCode(err) === 'ERR_HTTP_REQUEST_TIMEOUT';
      const status = timedOut ? '408 Request Timeout' : '400 Bad Request';
      if (socket.writable) socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\n\r\n`);
      else socket.destroy();
      this.refusals.note('http', timedOut ? '408' : '400', timedOut ? 'HTTP client too slow; connection closed' : 'malformed HTTP request; connection closed', {
        remote: (socket as { remoteAddress?: string }).remoteAddress,
        err: errorMessage(err),
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', (err) => {
        const code = errorCode(err);
        reject(
          new AgentError(
            'HTTP_LISTEN_FAILED',
            `cannot listen on ${this.opts.host}:${this.opts.port}: ${code === 'EADDRINUSE' ? 'the port is in use' : code === 'EACCES' ? 'permission denied' : errorMessage(err)} (${this.opts.configKeys ?? 'http.host/http.port'})`,
          ),
        );
      });
      server.listen(this.opts.port, this.opts.host, () => resolve());
    });
    if (this.stopped) {
      // Stopped while a listener that started late was binding.
      server.close();
      return;
    }
    this.server = server;
    this.secure = secure;
    const addr = this.address();
    this.opts.logger.info(
      { host: addr.host, port: addr.port, ...(pair ? { tls: true, certificateExpires: new Date(pair.notAfter).toISOString() } : {}) },
      `${this.opts.label ?? 'HTTP listener'} up`,
    );
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.stopped = true;
    this.server = null;
    this.secure = null;
    this.opts.certificate?.stop();
    this.refusals.stop();
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    const force = setTimeout(() => server.closeAllConnections(), 1_000);
    await closed;
    clearTimeout(force);
  }

  /** The certificate this listener serves, or fails to load; null without TLS. */
  certificateStatus(): CertificateStatus | null {
    return this.opts.certificate?.status() ?? null;
  }

  /** Connections open now, on every listener that shares its table. */
  openConnections(): number {
    return this.admission?.size ?? 0;
  }

  address(): { host: string; port: number } {
    const a = this.server?.address() as AddressInfo | null | undefined;
    return { host: a?.address ?? this.opts.host, port: a?.port ?? this.opts.port };
  }

  private async dispatch(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    let pathMatched = false;
    for (const r of this.routes) {
      const match = typeof r.path === 'string' ? (r.path === path ? ([] as unknown as RegExpExecArray) : null) : r.path.exec(path);
      if (!match) continue;
      pathMatched = true;
      if (r.method !== req.method) continue;
      if (!this.admitRequest(req, res, r.routeClass)) return;
      try {
        await r.handler(req, res, typeof r.path === 'string' ? null : match);
      } catch (err) {
        this.opts.logger.error({ err: errorMessage(err), path }, 'HTTP handler failed');
        sendJson(res, 500, { error: 'internal error' });
      }
      return;
    }
    req.resume();
    if (!this.admitRequest(req, res, 'other')) return;
    if (pathMatched) sendJson(res, 405, { error: 'method not allowed' });
    else sendJson(res, 404, { error: 'not found' });
  }

  /**
   * Marks what the connection is doing, and sheds what can wait: anything but the webhook while
   * connections are short. A shed request gets 503 with Retry-After and its connection is
   * closed, which frees the slot.
   */
  private admitRequest(req: IncomingMessage, res: ServerResponse, routeClass: RouteClass): boolean {
    const admission = this.admission;
    if (!admission) return true;
    // Webhooks are bounded by the connection table alone (a body is 64 KiB at most): every one
    // that got a connection is served.
    const shed = routeClass !== 'webhook' && admission.overSoft;
    if (shed) {
      req.resume();
      sendJson(res, 503, { error: 'busy: try again shortly' }, { 'retry-after': '5', connection: 'close' });
      this.refusals.note('http', '503', 'request shed while connections are short', { remote: req.socket.remoteAddress, path: (req.url ?? '').slice(0, 64) });
      return false;
    }
    admission.mark(req.socket, routeClass);
    res.once('finish', () => admission.mark(req.socket, 'idle'));
    return true;
  }
}
