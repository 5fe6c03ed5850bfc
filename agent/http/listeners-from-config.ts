import type { Config } from '../config/schema.js';
import type { Clock } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../observe/metrics.js';
import { HttpListener, type ListenerOptions } from './listener.js';

export interface Listeners {
  /** The contract's listener (http.host:http.port): status page, health, metrics, simulated GPIO. */
  http: HttpListener;
  /**
   * The listener that serves the vendor's webhook: `http` itself, or with `webhook.port` one of
   * its own, which serves nothing else. A site opens that one port to the vendor (a router's port
   * forward, a tunnel) and keeps the status page, its admin actions and the metrics on the LAN.
   */
  webhook: HttpListener;
}

/** The agent's HTTP listener(s), as the config asks; neither started. */
export function listenersFromConfig(config: Config, clock: Clock, metrics: Metrics, logger: Logger): Listeners {
  // Both listeners take the same timeouts and connection bounds: each holds them on its own.
  const common: Omit<ListenerOptions, 'host' | 'port' | 'logger'> = {
    headersTimeoutMs: config.http.headersTimeoutSeconds * 1000,
    requestTimeoutMs: config.http.requestTimeoutSeconds * 1000,
    idleTimeoutMs: config.http.idleTimeoutSeconds * 1000,
    maxConnections: config.http.maxConnections,
    clock,
    metrics,
  };
  const http = new HttpListener({ ...common, host: config.http.host, port: config.http.port, logger: logger.child({ component: 'http' }) });
  const ownPort = config.webhook.enabled ? config.webhook.port : undefined;
  if (ownPort === undefined) return { http, webhook: http };
  const webhook = new HttpListener({
    ...common,
    name: 'webhook-listener',
    label: 'webhook listener',
    configKeys: config.webhook.host === undefined ? 'http.host/webhook.port' : 'webhook.host/webhook.port',
    host: config.webhook.host ?? config.http.host,
    port: ownPort,
    logger: logger.child({ component: 'webhook-listener' }),
  });
  return { http, webhook };
}
