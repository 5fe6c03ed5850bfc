/**
 * The two parts of undici the vendor client uses, loaded by themselves: its connection-pooling
 * Agent and its request API. undici's index also loads fetch, WebSocket, EventSource, its caches
 * and its mocks, and in the agent's bundle compiling those was some 15 ms of every start on the
 * path to the first chair state (`npm run bench -- startup`). The paths are undici's own files
 * (no exports map); the version is pinned, and test/unit/vendor-api*.test.ts run through them.
 */
import type { Dispatcher } from 'undici';
// @ts-expect-error undici ships no types for its files, only for its index (typed below).
import AgentImpl from 'undici/lib/dispatcher/agent.js';
// @ts-expect-error as above
import requestImpl from 'undici/lib/api/api-request.js';

export type { Dispatcher };

export const Agent = AgentImpl as typeof import('undici').Agent;

/**
 * undici's ProxyAgent, loaded only where a proxy is set (most sites reach the vendor directly). It
 * opens its CONNECT tunnels with the `connect` method that undici's index gives every dispatcher
 * (`Object.assign(Dispatcher.prototype, api)`), which loading its parts alone skips: so it is
 * given here, as the index does.
 */
export async function loadProxyAgent(): Promise<typeof import('undici').ProxyAgent> {
  const [proxy, dispatcher, connect] = (await Promise.all([
    // @ts-expect-error as above
    import('undici/lib/dispatcher/proxy-agent.js'),
    // @ts-expect-error as above
    import('undici/lib/dispatcher/dispatcher.js'),
    // @ts-expect-error as above
    import('undici/lib/api/api-connect.js'),
  ])) as [{ default: typeof import('undici').ProxyAgent }, { default: { prototype: { connect?: unknown } } }, { default: unknown }];
  dispatcher.default.prototype.connect ??= connect.default;
  return proxy.default;
}

type RequestOptions = Omit<Dispatcher.RequestOptions, 'origin' | 'path' | 'method'> & { method: Dispatcher.HttpMethod };

/** undici's `request(url, options)`, on the given dispatcher. */
export function request(dispatcher: Dispatcher, url: URL, options: RequestOptions): Promise<Dispatcher.ResponseData> {
  const path = url.search ? `${url.pathname}${url.search}` : url.pathname;
  return (requestImpl as (this: Dispatcher, opts: Dispatcher.RequestOptions) => Promise<Dispatcher.ResponseData>).call(dispatcher, {
    ...options,
    origin: url.origin,
    path,
  });
}
