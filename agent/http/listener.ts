import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../logger.js';
import { AgentError, errorCode, errorMessage } from '../errors.js';
import type { Component } from '../components/component.js';
import { sendJson } from './body.js';

export type RouteHandler = (req: IncomingMessage, res: ServerResponse, match: RegExpExecArray | null) => Promise<void> | void;

interface Route {
  method: string;
  path: string | RegExp;
  handler: RouteHandler;
}

export interface ListenerOptions {
  host: string;
  port: number;
  logger: Logger;
  /** A client must send its headers within this time. */
  headersTimeoutMs?: number;
  /** ...and the whole request within this one. */
  requestTimeoutMs?: number;
}

/**
 * The agent's one HTTP listener (webhook, health, metrics, simulated GPIO). Short header and
 * request timeouts, checked every second, so a slow client cannot hold a connection for long.
 */
export class HttpListener implements Component {
  readonly name = 'http';
  private server: Server | null = null;
  private readonly routes: Route[] = [];

  constructor(private readonly opts: ListenerOptions) {}

  route(method: string, path: string | RegExp, handler: RouteHandler): void {
    this.routes.push({ method, path, handler });
  }

  async start(): Promise<void> {
    const server = createServer(
      {
        headersTimeout: this.opts.headersTimeoutMs ?? 5_000,
        requestTimeout: this.opts.requestTimeoutMs ?? 10_000,
        keepAliveTimeout: 5_000,
        connectionsCheckingInterval: 1_000,
      },
      (req, res) => void this.dispatch(req, res),
    );
    server.on('clientError', (err, socket) => {
      const status = errorCode(err) === 'ERR_HTTP_REQUEST_TIMEOUT' ? '408 Request Timeout' : '400 Bad Request';
      if (socket.writable) socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\n\r\n`);
      else socket.destroy();
      this.opts.logger.debug({ err: errorMessage(err) }, 'bad HTTP request from a client');
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', (err) => {
        const code = errorCode(err);
        reject(
          new AgentError(
            'HTTP_LISTEN_FAILED',
            `cannot listen on ${this.opts.host}:${this.opts.port}: ${code === 'EADDRINUSE' ? 'the port is in use' : code === 'EACCES' ? 'permission denied' : errorMessage(err)} (http.host/http.port)`,
          ),
        );
      });
      server.listen(this.opts.port, this.opts.host, () => resolve());
    });
    this.server = server;
    const addr = this.address();
    this.opts.logger.info({ host: addr.host, port: addr.port }, 'HTTP listener up');
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    const force = setTimeout(() => server.closeAllConnections(), 1_000);
    await closed;
    clearTimeout(force);
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
      try {
        await r.handler(req, res, typeof r.path === 'string' ? null : match);
      } catch (err) {
        this.opts.logger.error({ err: errorMessage(err), path }, 'HTTP handler failed');
        sendJson(res, 500, { error: 'internal error' });
      }
      return;
    }
    req.resume();
    if (pathMatched) sendJson(res, 405, { error: 'method not allowed' });
    else sendJson(res, 404, { error: 'not found' });
  }
}
