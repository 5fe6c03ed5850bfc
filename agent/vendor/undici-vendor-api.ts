import type { SecureContext } from 'node:tls';
import { UNTRUSTED_CHAIN_CODES } from '../platform/tls-files.js';
import { caStoreProblem, trustSystemCaStore } from '../platform/system-trust.js';
import { Agent, loadProxyAgent, request, type Dispatcher } from './undici-parts.js';
import { basicAuthorization, urlCredentials, withoutCredentials } from '../platform/url-credentials.js';
import { redactUrl } from '../config/redact.js';
import type { Clock } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import { fullJitterDelay, parseRetryAfter } from '../core/backoff.js';
import { VendorError } from './errors.js';
import { ListRepeats } from './list-repeat.js';
import { parseChairList, parseChairStatus, parseJsonText, parseTransactionListBody, unwrapEnvelope } from './parse.js';
import type { CallOptions, ChairList, ChairReading, TransactionPage, TransactionQuery, VendorApi } from './vendor-api.js';

export type VendorEndpoint = 'lists' | 'status' | 'transactions' | 'control';

export interface VendorClientOptions {
  baseUrl: string;
  apiKey: string;
  /** Deadline of one attempt, connect to last body byte. */
  timeoutMs: number;
  /** Extra attempts for idempotent GETs. */
  retries: number;
  backoffBaseMs?: number;
  backoffCapMs?: number;
  /** Largest body read from the vendor's list endpoints (chairs, transactions); status and control answers are small. */
  maxBodyBytes?: number;
  clock: Clock;
  logger: Logger;
  random?: () => number;
  /** Called once per attempt: for metrics. */
  observe?: (endpoint: VendorEndpoint, outcome: string, seconds: number) => void;
  dispatcher?: Dispatcher;
  /** The outbound proxy to the vendor (vendor.proxy): http(s):// or socks5://, credentials in the URL. */
  proxy?: string | undefined;
  /** vendor.ca: a TLS context that trusts it besides the usual CAs, and the file, to name it. */
  trust?: { secureContext: SecureContext; file: string } | undefined;
}

/** Errors raised before a byte of the request can have reached the vendor. */
const NOT_SENT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
]);

function causeCode(err: unknown): string | undefined {
  let e: unknown = err;
  for (let depth = 0; depth < 4 && e && typeof e === 'object'; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    const inner = (e as { errors?: unknown[] }).errors?.[0] ?? (e as { cause?: unknown }).cause;
    e = inner;
  }
  return undefined;
}

/**
 * The proxy's address and its credentials, decoded here as curl decodes them (undici would
 * decodeURIComponent them, and throw at a bare % such as "50%off"): Basic for an http(s) proxy, the
 * user and password for socks5 (whose agent undici hands the URL's still-encoded ones).
 */
function proxyEndpoint(proxy: string): { uri: string; token?: string; username?: string; password?: string } {
  const url = new URL(proxy);
  const credentials = urlCredentials(url);
  const uri = withoutCredentials(url).href;
  if (!credentials) return { uri };
  return url.protocol === 'socks5:' ? { uri, ...credentials } : { uri, token: basicAuthorization(credentials) };
}

class DeadlineExceeded extends Error {}

export class UndiciVendorApi implements VendorApi {
  private readonly origin: URL;
  private dispatcher: Dispatcher | null;
  /** The proxy's dispatcher, being made (its module is loaded at the first request). */
  private proxied: Promise<Dispatcher> | null = null;
  private readonly ownsDispatcher: boolean;
  private readonly listRepeats = new ListRepeats();

  constructor(private readonly opts: VendorClientOptions) {
    this.origin = new URL(opts.baseUrl.endsWith('/') ? opts.baseUrl : `${opts.baseUrl}/`);
    this.ownsDispatcher = !opts.dispatcher;
    const tls = opts.trust ? { secureContext: opts.trust.secureContext } : {};
    this.dispatcher = opts.dispatcher ?? (opts.proxy ? null : new Agent({ connect: { timeout: opts.timeoutMs, ...tls }, keepAliveTimeout: 10_000, connections: 4 }));
  }

  /**
   * The connection pool, or through vendor.proxy: CONNECT for an https:// vendor (every proxy
   * allows it to 443), an absolute-form request for http:// (as curl sends it: a proxy may allow
   * CONNECT to 443 only).
   */
  private async pool(): Promise<Dispatcher> {
    if (this.origin.protocol === 'https:' || this.opts.proxy?.startsWith('https:')) trustSystemCaStore(this.opts.logger);
    if (this.dispatcher) return this.dispatcher;
    this.proxied ??= loadProxyAgent().then(
      (ProxyAgent) =>
        (this.dispatcher = new ProxyAgent({
          ...proxyEndpoint(this.opts.proxy ?? ''),
          proxyTunnel: this.origin.protocol === 'https:',
          connect: { timeout: this.opts.timeoutMs },
          // TLS to the vendor inside the tunnel (the proxy's own is proxyTls).
          ...(this.opts.trust ? { requestTls: { secureContext: this.opts.trust.secureContext } } : {}),
          keepAliveTimeout: 10_000,
          connections: 4,
        })),
    );
    return this.proxied;
  }

  async listChairs(options: CallOptions = {}): Promise<ChairList> {
    const text = await this.get('lists', 'api/chair/lists', options);
    return this.listRepeats.read(text, (body) => parseChairList(unwrapEnvelope(parseJsonText(body))));
  }

  async chairStatus(deviceId: string, options: CallOptions = {}): Promise<ChairReading> {
    const text = await this.get('status', `api/chair/status/${encodeURIComponent(deviceId)}`, options);
    return parseChairStatus(unwrapEnvelope(parseJsonText(text)), deviceId);
  }

  async listTransactions(query: TransactionQuery, options: CallOptions = {}): Promise<TransactionPage> {
    const qs = new URLSearchParams({
      from: query.from,
      to: query.to,
      limit: String(query.limit),
      offset: String(query.offset),
      order: query.order,
    });
    const text = await this.get('transactions', `api/chair/transactions?${qs.toString()}`, options);
    return parseTransactionListBody(text);
  }

  async control(deviceId: string, minutes: number, options: CallOptions = {}): Promise<void> {
    const text = await this.attempt('control', 'POST', 'api/chair/control', options.signal, {
      DeviceId: deviceId,
      Time: String(minutes),
    });
    const body = text.trim() === '' ? {} : parseJsonText(text);
    // The documented answer is {}; an envelope that says otherwise is a refusal.
    if (body && typeof body === 'object' && !Array.isArray(body) && 'status' in body) {
      const status = (body as { status: unknown }).status;
      if (typeof status === 'string' && status.toLowerCase() !== 'success') {
        const code = (body as { code?: unknown }).code;
        const message = (body as { message?: unknown }).message;
        throw new VendorError(
          'VENDOR_REFUSED',
          `vendor refused the start${typeof message === 'string' ? `: ${message.slice(0, 200)}` : ''}`,
          { status: typeof code === 'number' ? code : undefined },
        );
      }
    }
  }

  private untrustedReason(): string {
    // A site's CA that is in the store but cannot be read (a DER file renamed .crt) is the likely cause.
    const store = caStoreProblem() ? "; the box's CA store holds what cannot be read (doctor names the file)" : '';
    return (this.opts.trust
      ? `it is signed by none of the usual CAs, the box's CA store, nor ${this.opts.trust.file} (vendor.ca): is that the CA of the site's inspecting proxy?`
      : "where the site's network inspects TLS (a proxy presenting its own certificate), its CA goes in the box's CA store (update-ca-certificates) or in vendor.ca") + store;
  }

  /** The proxy as it may be logged: host and port, any password masked. */
  /**
   * An error page the site's proxy made itself, not the vendor's answer: a proxy that inspects
   * TLS answers in the vendor's place, and squid marks its own with X-Squid-Error. Its 403 is the
   * proxy's rules, not a refused Apikey.
   */
  private proxyAnswer(status: number, headers: Record<string, string | string[] | undefined>): VendorError | null {
    if (!this.opts.proxy) return null;
    const first = (v: string | string[] | undefined): string => (Array.isArray(v) ? (v[0] ?? '') : (v ?? ''));
    const said = first(headers['x-squid-error']);
    if (said === '') return null;
    // Errors from before squid sent the request on: a start it refused or could not forward was not made.
    const notSent = /ERR_CONNECT_FAIL|ERR_DNS_FAIL|ERR_ACCESS_DENIED|ERR_CANNOT_FORWARD/.test(said);
    const why =
      status === 403
        ? "the proxy's rules refuse this request: the site's IT allows the vendor's address"
        : notSent
          ? 'the proxy could not reach the vendor'
          : "see the proxy's log";
    return new VendorError('VENDOR_UNREACHABLE', `the proxy ${this.proxyName()} answered HTTP ${status} in place of ${this.origin.host} (${said.slice(0, 120)}): ${why}`, {
      status,
      retryable: true,
      ambiguous: !notSent,
    });
  }

  private proxyName(): string {
    return redactUrl(this.opts.proxy ?? '(none)');
  }

  /** Ends every connection; a request still under way is aborted (the agent is stopping). */
  async close(): Promise<void> {
    if (this.ownsDispatcher) await (this.dispatcher ?? (this.proxied ? await this.proxied : null))?.destroy();
  }

  private async get(endpoint: VendorEndpoint, path: string, options: CallOptions): Promise<string> {
    const retries = options.retries ?? this.opts.retries;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.attempt(endpoint, 'GET', path, options.signal);
      } catch (err) {
        if (!(err instanceof VendorError) || !err.retryable || attempt >= retries || options.signal?.aborted) throw err;
        const jitter = fullJitterDelay(attempt, this.opts.backoffBaseMs ?? 250, this.opts.backoffCapMs ?? 5_000, this.opts.random);
        const wait = Math.max(jitter, Math.min(err.retryAfterMs ?? 0, 30_000));
        this.opts.logger.debug({ endpoint, attempt: attempt + 1, waitMs: wait, code: err.code }, 'vendor request failed, retrying');
        try {
          await this.opts.clock.sleep(wait, options.signal);
        } catch {
          throw new VendorError('VENDOR_ABORTED', 'vendor request aborted: the agent is stopping');
        }
      }
    }
  }

  private async attempt(
    endpoint: VendorEndpoint,
    method: 'GET' | 'POST',
    path: string,
    stop: AbortSignal | undefined,
    json?: unknown,
  ): Promise<string> {
    const url = new URL(path, this.origin);
    const started = this.opts.clock.monotonic();
    const controller = new AbortController();
    const deadline = this.opts.clock.setTimeout(() => controller.abort(new DeadlineExceeded()), this.opts.timeoutMs);
    const onStop = (): void => controller.abort(stop?.reason);
    stop?.addEventListener('abort', onStop, { once: true });
    if (stop?.aborted) onStop();
    let outcome = 'error';
    try {
      const res = await request(await this.pool(), url, {
        method,
        signal: controller.signal,
        headers: {
          Apikey: this.opts.apiKey,
          accept: 'application/json',
          ...(json === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: json === undefined ? undefined : JSON.stringify(json),
        headersTimeout: this.opts.timeoutMs,
        bodyTimeout: this.opts.timeoutMs,
      });
      const text = await this.readBody(res.body, endpoint);
      outcome = String(res.statusCode);
      if (res.statusCode >= 200 && res.statusCode < 300) return text;
      throw this.proxyAnswer(res.statusCode, res.headers) ?? statusError(endpoint, res.statusCode, res.headers['retry-after'], this.opts.clock.now());
    } catch (err) {
      const mapped = this.mapError(err, endpoint, controller.signal);
      if (outcome === 'error') outcome = mapped.code;
      throw mapped;
    } finally {
      deadline.cancel();
      stop?.removeEventListener('abort', onStop);
      this.opts.observe?.(endpoint, outcome, (this.opts.clock.monotonic() - started) / 1000);
    }
  }

  private async readBody(body: Dispatcher.ResponseData['body'], endpoint: VendorEndpoint): Promise<string> {
    const max = endpoint === 'lists' || endpoint === 'transactions' ? (this.opts.maxBodyBytes ?? 4 * 1024 * 1024) : SMALL_BODY_BYTES;
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of body) {
      const buf = chunk as Buffer;
      size += buf.length;
      if (size > max) {
        body.destroy();
        throw new VendorError('VENDOR_BAD_ENVELOPE', `vendor answer is larger than ${max} bytes`);
      }
      chunks.push(buf);
    }
    return Buffer.concat(chunks).toString('utf8');
  }

  private mapError(err: unknown, endpoint: VendorEndpoint, signal: AbortSignal): VendorError {
    if (err instanceof VendorError) return err;
    if (signal.aborted) {
      if (signal.reason instanceof DeadlineExceeded) {
        return new VendorError('VENDOR_TIMEOUT', `vendor did not answer ${endpoint} within ${this.opts.timeoutMs} ms`, {
          ambiguous: true,
          retryable: true,
        });
      }
      return new VendorError('VENDOR_ABORTED', 'vendor request aborted: the agent is stopping');
    }
    // The proxy's own refusal, said as the proxy's: a CONNECT answered 403 or 407 ("Proxy response
    // (407) !== 200 when HTTP Tunneling"), or a 407 to an absolute-form request, which undici
    // throws as "Proxy Authentication Required (407)".
    const refused = /^Proxy response \((\d+)\)|^Proxy Authentication Required \((407)\)/.exec(errorText(err));
    if (refused && this.opts.proxy) {
      const status = refused[1] ?? refused[2];
      return new VendorError('VENDOR_UNREACHABLE', `the proxy ${this.proxyName()} refused the connection to ${this.origin.host} (HTTP ${status}${status === '407' ? ': it wants credentials, user:password@ in vendor.proxy' : ''})`, {
        retryable: true,
      }, err);
    }
    const code = causeCode(err) ?? 'UNKNOWN';
    if (code.startsWith('UND_ERR_SOCKS5') && this.opts.proxy) {
      // Refused in the SOCKS handshake, before a byte of the request went to the vendor.
      return new VendorError('VENDOR_UNREACHABLE', `the proxy ${this.proxyName()} did not connect to ${this.origin.host} (SOCKS5: ${socksReason(code, errorText(err))})`, { retryable: true }, err);
    }
    if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
      return new VendorError('VENDOR_TIMEOUT', `vendor did not answer ${endpoint} within ${this.opts.timeoutMs} ms`, {
        ambiguous: true,
        retryable: true,
      }, err);
    }
    if (UNTRUSTED_CHAIN_CODES.has(code)) {
      // Refused in the TLS handshake: not a byte of the request was sent.
      return new VendorError('VENDOR_UNREACHABLE', `the certificate presented for ${this.origin.host} is not trusted (${code}): ${this.untrustedReason()}`, { retryable: true }, err);
    }
    const notSent = NOT_SENT_CODES.has(code);
    return new VendorError(
      'VENDOR_UNREACHABLE',
      `vendor unreachable at ${this.origin.host}${this.opts.proxy ? ` through the proxy ${this.proxyName()}` : ''} (${code})`,
      { ambiguous: !notSent, retryable: true },
      err,
    );
  }
}

/**
 * What a SOCKS5 proxy's refusal means for the site (RFC 1928 and 1929): undici's codes for the
 * method and login sub-negotiations, and UND_ERR_SOCKS5_REPLY_<n> for the proxy's reply.
 */
function socksReason(code: string, message: string): string {
  switch (code) {
    case 'UND_ERR_SOCKS5_AUTH_REJECTED':
      return 'it wants credentials, user:password@ in vendor.proxy';
    case 'UND_ERR_SOCKS5_AUTH_FAILED':
      return 'it refused the user and password in vendor.proxy';
    case 'UND_ERR_SOCKS5_REPLY_2':
      return 'its rules do not allow this connection';
    default:
      return message.replace(/^SOCKS5 connection failed: /, '');
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A chair's status and the control answer are a few hundred bytes. */
const SMALL_BODY_BYTES = 64 * 1024;

function statusError(endpoint: VendorEndpoint, status: number, retryAfter: string | string[] | undefined, now: number): VendorError {
  if (status === 401 || status === 403) {
    return new VendorError('VENDOR_UNAUTHORIZED', `vendor rejected the Apikey (HTTP ${status})`, { status });
  }
  if (status === 404) {
    return new VendorError('VENDOR_NOT_FOUND', `vendor has no such ${endpoint === 'status' ? 'chair' : 'resource'} (HTTP 404)`, { status });
  }
  if (status === 429 || status >= 500) {
    return new VendorError('VENDOR_HTTP_ERROR', `vendor answered HTTP ${status} to ${endpoint}`, {
      status,
      retryable: true,
      ambiguous: status >= 500,
      retryAfterMs: parseRetryAfter(retryAfter, now),
    });
  }
  return new VendorError('VENDOR_REFUSED', `vendor refused ${endpoint} (HTTP ${status})`, { status });
}
