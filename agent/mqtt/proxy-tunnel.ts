import { Agent, request as httpRequest, type ClientRequestArgs } from 'node:http';
import { createRequire } from 'node:module';
import { isIP, type Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { errorCode, errorMessage } from '../platform/errors.js';
import { UNTRUSTED_CHAIN_CODES } from '../platform/tls-files.js';
import { basicAuthorization, urlCredentials } from '../platform/url-credentials.js';
import { redactUrl } from '../config/redact.js';
import { ProxyError } from './proxy-error.js';
import { openSocksTunnel } from './socks-tunnel.js';

/**
 * The broker through the site's HTTP proxy (mqtt.proxy): a CONNECT tunnel, as a browser opens one
 * for wss://, for every MQTT transport (a socks5:// proxy: socks-tunnel.ts). Proxies that let a
 * box out at all let it out this way, usually to port 443 only (squid's and tinyproxy's
 * defaults), which is why a central broker for such sites listens with wss:// (or mqtts://) on 443.
 */

/**
 * What a proxy that inspects TLS does to a broker connection: it presents its own certificate
 * (an untrusted chain) or, trusted, finds MQTT where it expects HTTP and drops it.
 */
export const INSPECTION_FIX = "a proxy that inspects TLS cannot carry MQTT: have it pass the broker's host through untouched (an inspection exception; squid: ssl_bump splice)";

/** A broker connection's error as the log and doctor say it: through a proxy, an untrusted chain is most likely its inspection. */
export function brokerErrorText(err: unknown, proxy: string | undefined): string {
  const code = errorCode(err);
  if (proxy !== undefined && code !== undefined && UNTRUSTED_CHAIN_CODES.has(code))
    return `the certificate presented for the broker is not trusted (${code}): through mqtt.proxy, most likely the proxy inspecting TLS with a certificate of its own; ${INSPECTION_FIX}`;
  // Node's "socket hang up": the proxy said 200, then closed the tunnel before the broker spoke.
  if (proxy !== undefined && code === 'ECONNRESET' && !(err instanceof ProxyError))
    return `the tunnel through mqtt.proxy closed before the broker answered (${errorMessage(err)}): the proxy's log says why (a broker it cannot reach, or TLS inspection)`;
  return errorMessage(err);
}

/** Where a tunnel goes, and through which proxy. */
export interface TunnelTarget {
  /** http://[user:password@]host[:port] or https://…; the credentials go as Basic auth. Or socks5://. */
  proxy: string;
  host: string;
  port: number;
  /** How long the proxy has to answer the CONNECT: the caller's connect timeout covers the rest. */
  timeoutMs: number;
}

/** Opens a CONNECT tunnel (or a SOCKS5 connection) to host:port through the proxy: the socket carries the broker's bytes. */
export function openTunnel(t: TunnelTarget): Promise<Socket> {
  const proxy = new URL(t.proxy);
  if (proxy.protocol === 'socks5:') return openSocksTunnel(t);
  const secure = proxy.protocol === 'https:';
  const authority = `${isIP(t.host) === 6 ? `[${t.host}]` : t.host}:${t.port}`;
  const headers: Record<string, string> = { host: authority };
  const credentials = urlCredentials(proxy);
  if (credentials) headers['proxy-authorization'] = basicAuthorization(credentials);
  const named = `the proxy ${redactUrl(proxy.origin)}`;
  return new Promise((resolve, reject) => {
    // node:https only for a proxy spoken to over TLS, which few sites have (as in http/listener.ts).
    const request = secure ? (createRequire(import.meta.url)('node:https') as typeof import('node:https')).request : httpRequest;
    const req = request({
      host: proxy.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: proxy.port ? Number(proxy.port) : secure ? 443 : 80,
      method: 'CONNECT',
      path: authority,
      headers,
      agent: false,
      timeout: t.timeoutMs,
    });
    // Node hands every answer to a CONNECT here, 200 or not (its body unread).
    req.on('connect', (res, socket, head) => {
      const status = res.statusCode ?? 0;
      if (status === 200) {
        socket.setTimeout(0);
        // MQTT packets are small: Nagle's algorithm would hold each for the peer's delayed ACK.
        socket.setNoDelay(true);
        if (head.length > 0) socket.unshift(head);
        resolve(socket);
        return;
      }
      socket.destroy();
      const said = `HTTP ${status}${res.statusMessage ? ` ${res.statusMessage}` : ''}`;
      reject(new ProxyError('PROXY_REFUSED', `${named} refused the tunnel to ${authority} (${said}): ${refusalReason(status)}`));
    });
    req.on('timeout', () => req.destroy(new ProxyError('PROXY_TIMEOUT', `${named} did not answer the CONNECT to ${authority} within ${t.timeoutMs} ms`)));
    req.on('error', (err: Error & { code?: string }) => {
      if (err instanceof ProxyError) reject(err);
      else reject(new ProxyError('PROXY_UNREACHABLE', `${named} ${failure(err)}`, { cause: err }));
    });
    req.end();
  });
}

/** What went wrong before the proxy answered, in its words for the log. */
function failure(err: Error & { code?: string }): string {
  const code = err.code ?? err.message;
  if (code.startsWith('HPE_')) return `did not answer the CONNECT as an HTTP proxy does (${code}): is mqtt.proxy the proxy's HTTP port?`;
  if (code === 'ECONNRESET') return 'closed the connection without answering the CONNECT';
  return `cannot be reached (${code})`;
}

function refusalReason(status: number): string {
  // tinyproxy answers a CONNECT without its BasicAuth with 401, squid with 407.
  if (status === 401 || status === 407) return 'it wants credentials, user:password@ in mqtt.proxy';
  if (status === 403)
    return "it allows no tunnel to that host or port: Debian's squid and tinyproxy allow CONNECT to port 443 only (squid: acl SSL_ports port <port>; tinyproxy: ConnectPort <port>), so a broker reached through a proxy usually listens on 443";
  if (status === 502 || status === 503 || status === 504) return 'the proxy could not reach the broker';
  return "see the proxy's log";
}

/**
 * A stream that is the tunnel once it is open: mqtt.js wants its stream at once, and writes its
 * CONNECT before the proxy has answered. Writes wait for the tunnel in order (a Writable calls
 * _write again only after the last one's callback); a refused tunnel destroys it with the reason.
 */
export class TunnelStream extends Duplex {
  private inner: Socket | null = null;
  private readonly ready: Promise<Socket>;

  constructor(tunnel: Promise<Socket>) {
    super();
    this.ready = tunnel;
    tunnel.then(
      (socket) => this.attach(socket),
      (err: Error) => this.destroy(err),
    );
  }

  private attach(socket: Socket): void {
    if (this.destroyed) {
      socket.destroy();
      return;
    }
    this.inner = socket;
    socket.pause();
    socket.on('data', (chunk: Buffer) => {
      if (!this.push(chunk)) socket.pause();
    });
    socket.on('end', () => this.push(null));
    socket.on('error', (err) => this.destroy(err));
    socket.on('close', () => this.destroy());
    if (this.readableFlowing !== false) socket.resume();
  }

  override _read(): void {
    this.inner?.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    if (this.inner) this.inner.write(chunk, done);
    else this.ready.then((s) => void s.write(chunk, done), done);
  }

  override _final(done: (err?: Error | null) => void): void {
    this.ready.then((s) => void s.end(done), done);
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    this.inner?.destroy();
    done(err);
  }
}

/** The TLS options of a broker connection (mqtt.ca, cert, key, rejectUnauthorized). */
export type TunnelTls = Pick<ConnectionOptions, 'ca' | 'cert' | 'key' | 'rejectUnauthorized'>;

/** TLS to the broker inside the tunnel, checked against the broker's name as a direct one would be. */
export function tlsInTunnel(socket: Duplex, host: string, tls: TunnelTls): ReturnType<typeof tlsConnect> {
  return tlsConnect({ ...tls, socket, ...(isIP(host) === 0 ? { servername: host } : {}), host });
}

/**
 * For ws:// and wss://: the WebSocket library asks an http.Agent for its connection, and this one
 * opens it through the proxy (TLS inside the tunnel for wss://, with the TLS options the request carries).
 */
export class TunnelAgent extends Agent {
  constructor(
    private readonly proxy: string,
    private readonly secure: boolean,
    private readonly timeoutMs: number,
  ) {
    super({ keepAlive: false });
    // https.request refuses an agent of another protocol than its own.
    (this as unknown as { protocol: string }).protocol = secure ? 'https:' : 'http:';
    (this as unknown as { defaultPort: number }).defaultPort = secure ? 443 : 80;
  }

  override createConnection(options: ClientRequestArgs, callback?: (err: Error | null, stream: Duplex) => void): Duplex | null | undefined {
    const host = (options.hostname ?? options.host ?? 'localhost').replace(/^\[(.*)\]$/, '$1');
    const port = Number(options.port ?? (this.secure ? 443 : 80));
    openTunnel({ proxy: this.proxy, host, port, timeoutMs: this.timeoutMs }).then(
      (socket) => {
        if (!this.secure) return callback?.(null, socket);
        const o = options as ClientRequestArgs & TunnelTls;
        const tls: TunnelTls = { rejectUnauthorized: o.rejectUnauthorized !== false };
        if (o.ca) tls.ca = o.ca;
        if (o.cert) tls.cert = o.cert;
        if (o.key) tls.key = o.key;
        callback?.(null, tlsInTunnel(socket, host, tls));
      },
      (err: Error) => callback?.(err, undefined as unknown as Duplex),
    );
    return undefined;
  }
}
