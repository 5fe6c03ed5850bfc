import type { Config } from '../config/schema.js';
import type { Clock } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../observe/metrics.js';
import { HttpListener, type ListenerOptions } from './listener.js';
import { connectionTable } from './admission.js';
import { ServedCertificate } from './served-certificate.js';

export interface Listeners {
  /** The contract's listener (http.host:http.port): status page, health, metrics, simulated GPIO. */
  http: HttpListener;
  /**
   * The listener that serves the vendor's webhook: `http` itself, or with `webhook.port` one of
   * its own, which serves nothing else. A site opens that one port to the vendor (a router's port
   * forward, a tunnel) and keeps the status page, its admin actions and the metrics on the LAN.
   * With `webhook.cert` and `webhook.key` that port serves HTTPS.
   */
  webhook: HttpListener;
}

/** The agent's HTTP listener(s), as the config asks; neither started. */
export function listenersFromConfig(config: Config, clock: Clock, metrics: Metrics, logger: Logger): Listeners {
  // Both listeners take the same timeouts, and hold their connections in one table: a flood on
  // either port leaves the box no more open connections than http.maxConnections allows.
  const common: Omit<ListenerOptions, 'host' | 'port' | 'logger'> = {
    headersTimeoutMs: config.http.headersTimeoutSeconds * 1000,
    requestTimeoutMs: config.http.requestTimeoutSeconds * 1000,
    idleTimeoutMs: config.http.idleTimeoutSeconds * 1000,
    maxConnections: config.http.maxConnections,
    connections: connectionTable(config.http.maxConnections, () => clock.monotonic()),
    clock,
    metrics,
  };
  const http = new HttpListener({ ...common, host: config.http.host, port: config.http.port, logger: logger.child({ component: 'http' }) });
  const ownPort = config.webhook.enabled ? config.webhook.port : undefined;
  if (ownPort === undefined) return { http, webhook: http };
  const { cert, key } = config.webhook;
  const webhookLogger = logger.child({ component: 'webhook-listener' });
  const certificate =
    cert !== undefined && key !== undefined
      ? new ServedCertificate({ files: { cert, key }, keys: { cert: 'webhook.cert', key: 'webhook.key' }, clock, logger: webhookLogger })
      : undefined;
  if (certificate) {
    metrics.gauge('chair_agent_webhook_certificate_expiry_timestamp_seconds', 'When the certificate the webhook port serves expires', () => {
      const at = certificate.status().expiresAt;
      return at === null ? null : Math.floor(at / 1000);
    });
  }
  const webhook = new HttpListener({
    ...common,
    ...(certificate ? { certificate } : {}),
    name: 'webhook-listener',
    label: 'webhook listener',
    configKeys: config.webhook.host === undefined ? 'http.host/webhook.port' : 'webhook.host/webhook.port',
    host: config.webhook.host ?? config.http.host,
    port: ownPort,
    logger: webhookLogger,
  });
  return { http, webhook };
}
