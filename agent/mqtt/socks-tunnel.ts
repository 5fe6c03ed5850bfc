import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import type { SocksClient as SocksClientType } from 'socks';
import { redactUrl } from '../config/redact.js';
import { errorMessage } from '../platform/errors.js';
import { urlCredentials } from '../platform/url-credentials.js';
import { ProxyError } from './proxy-error.js';

/**
 * The broker through a SOCKS5 proxy (mqtt.proxy: socks5://[user:password@]host:port), with the
 * login of RFC 1929 where the URL has one. The proxy resolves the broker's name, as it does for
 * vendor.proxy: a site whose only way out is the proxy often has no DNS for outside names.
 *
 * Loaded at the first connect through such a proxy, from node_modules at run time: the bundle
 * keeps mqtt.js's own SOCKS code out (scripts/bundle.mjs), and a box without a SOCKS proxy never
 * reads the library. mqtt.js's socksProxy option sends no login, so it is not used.
 */
export async function openSocksTunnel(t: { proxy: string; host: string; port: number; timeoutMs: number }): Promise<Socket> {
  const proxy = new URL(t.proxy);
  const credentials = urlCredentials(proxy);
  // A name esbuild leaves alone: Node resolves it at run time (not the bundle's stand-in for it).
  const { SocksClient } = createRequire(import.meta.url)('socks') as { SocksClient: typeof SocksClientType };
  const authority = `${t.host.includes(':') ? `[${t.host}]` : t.host}:${t.port}`;
  const named = `the proxy ${redactUrl(`${proxy.protocol}//${proxy.host}`)}`;
  try {
    const { socket } = await SocksClient.createConnection({
      proxy: {
        host: proxy.hostname.replace(/^\[(.*)\]$/, '$1'),
        port: proxy.port ? Number(proxy.port) : 1080,
        type: 5,
        ...(credentials ? { userId: credentials.username, password: credentials.password } : {}),
      },
      command: 'connect',
      destination: { host: t.host, port: t.port },
      timeout: t.timeoutMs,
    });
    // MQTT packets are small: Nagle's algorithm would hold each for the peer's delayed ACK.
    socket.setNoDelay(true);
    return socket;
  } catch (err) {
    throw socksError(errorMessage(err), named, authority, t.timeoutMs, err);
  }
}

/** The SOCKS library's error, said as the proxy's (its messages: socks/build/common/constants.js). */
export function socksError(message: string, named: string, authority: string, timeoutMs: number, cause?: unknown): ProxyError {
  const refused = (why: string): ProxyError => new ProxyError('PROXY_REFUSED', `${named} did not connect to ${authority} (SOCKS5: ${why})`, { cause });
  if (message.includes('no accepted authentication type')) return refused('it wants credentials, user:password@ in mqtt.proxy');
  if (message.includes('Socks5 Authentication failed')) return refused('it refused the user and password in mqtt.proxy');
  const rejected = /Socks5 proxy rejected connection - (\w+)/.exec(message)?.[1];
  if (rejected === 'NotAllowed') return refused('its rules do not allow this connection');
  if (rejected !== undefined) return refused(`it could not reach the broker: ${rejected.replace(/([a-z])([A-Z])/g, '$1 $2')}`);
  if (message.includes('timed out')) return new ProxyError('PROXY_TIMEOUT', `${named} did not open the SOCKS5 connection to ${authority} within ${timeoutMs} ms`, { cause });
  if (message.startsWith('Received invalid Socks5'))
    return new ProxyError('PROXY_UNREACHABLE', `${named} did not answer as a SOCKS5 proxy does (${message}): is mqtt.proxy the proxy's SOCKS port?`, { cause });
  if (message === 'Socket closed') return new ProxyError('PROXY_UNREACHABLE', `${named} closed the connection during the SOCKS5 handshake`, { cause });
  const code = /\b(E[A-Z]+)\b/.exec(message)?.[1];
  return new ProxyError('PROXY_UNREACHABLE', `${named} cannot be reached (${code ?? message})`, { cause });
}
