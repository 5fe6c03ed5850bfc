import type { Clock } from '../platform/clock.js';
import { redactUrl } from '../config/redact.js';
import type { ChairRegistry } from '../core/chair-registry.js';
import { formatIsoWithOffset } from '../time/vendor-time.js';
import type { Health } from './health.js';
import type { Metrics } from './metrics.js';
import type { Broker } from '../mqtt/broker.js';
import type { RefusalSummary } from '../mqtt/refusal-guard.js';
import type { Outbox, OutboxStats } from '../store/outbox.js';
import { agentVersion, runtimeFacts } from '../platform/version.js';
import type { CertificateStatus } from '../http/served-certificate.js';
import { errorMessage } from '../platform/errors.js';
import type { DaySummary } from '../summary/day-tally.js';

/** What the status outputs say about the site itself: a slice of the config, not the whole. */
export interface SiteFacts {
  siteId: string;
  /** site.timezone: every time shown is in it. */
  timeZone: string;
  vendorBaseUrl: string;
  gpioDriver: string;
}

export interface StatusSources {
  site: SiteFacts;
  clock: Clock;
  health: Health;
  registry: ChairRegistry;
  broker: Broker;
  outbox: Outbox;
  inFlight: () => number;
  /** Publishes the broker refused, by topic class, and the retained topics held because of it. */
  refusals: () => RefusalSummary;
  /** Today at a glance: uses, minutes and takings per chair and for the site. */
  today: () => DaySummary;
  /** The certificate the webhook port serves, or fails to load; null when it serves no TLS. */
  webhookCertificate?: () => CertificateStatus | null;
}

/** The backlog figures, times in ISO 8601 with the site's offset. */
export function backlogFigures(s: Pick<StatusSources, 'outbox' | 'site'>): Record<string, unknown> {
  let st: OutboxStats;
  try {
    st = s.outbox.stats();
  } catch (err) {
    // The database reports itself (health); the rest of bridge/info still goes out.
    return { error: errorMessage(err) };
  }
  const iso = (t: number | null): string | null => (t === null ? null : formatIsoWithOffset(t, s.site.timeZone));
  return { pending: st.pending, parked: st.parked, oldestPendingAt: iso(st.oldestPendingAt), delivered: st.delivered, lastDeliveryAt: iso(st.lastDeliveryAt) };
}

/** Refusals by topic class and the topics held now, times in the site's offset. */
export function refusalFigures(s: Pick<StatusSources, 'refusals' | 'site'>): Record<string, unknown> {
  const r = s.refusals();
  return {
    total: r.total,
    byClass: r.byClass,
    held: r.held.map((h) => ({ topic: h.topic, class: h.topicClass, reason: h.reason, refusals: h.refusals, retryAt: formatIsoWithOffset(h.retryAt, s.site.timeZone) })),
  };
}

/** The bridge/info payload. */
export function bridgeInfo(s: StatusSources): Record<string, unknown> {
  const { site, health } = s;
  const iso = (t: number | null): string | null => (t === null ? null : formatIsoWithOffset(t, site.timeZone));
  const certificate = s.webhookCertificate?.() ?? null;
  return {
    version: agentVersion(),
    runtime: runtimeFacts(),
    siteId: site.siteId,
    startedAt: iso(health.startedAt),
    vendor: { reachable: health.get('vendor').ok, detail: health.get('vendor').detail, baseUrl: redactUrl(site.vendorBaseUrl) },
    broker: { url: s.broker.description, connected: s.broker.connected },
    clock: { ok: health.get('clock').ok, detail: health.get('clock').detail },
    gpio: { driver: site.gpioDriver, ok: health.get('gpio').ok, detail: health.get('gpio').detail },
    lastPollAt: iso(health.lastPollAt),
    lastSyncAt: iso(health.lastSyncAt),
    backlog: backlogFigures(s),
    refused: refusalFigures(s),
    chairs: s.registry.knownIds().length,
    health: health.ok ? 'ok' : 'degraded',
    // Only with webhook.cert: a fleet watching the central broker sees a renewal that stopped.
    ...(certificate === null ? {} : { webhookCertificate: { expiresAt: iso(certificate.expiresAt), problem: certificate.problem } }),
  };
}

/**
 * bridge/info for a broker that does not take it whole (Mosquitto's message_size_limit): the
 * topics held are named one, the most refused, and counted (`refused.heldOmitted`). Each held
 * topic adds about 200 bytes, and a refused bridge/info is held itself: without this the report
 * that says what the broker refuses would be refused in its turn, and doctor could not read it.
 */
export function shortBridgeInfo(info: Record<string, unknown>): Record<string, unknown> {
  const refused = info['refused'] as { held?: unknown[] } | undefined;
  const held = refused?.held ?? [];
  if (held.length <= 1) return info;
  return { ...info, refused: { ...refused, held: held.slice(0, 1), heldOmitted: held.length - 1 } };
}

/** Gauges read from the agent's state at scrape time. */
export function registerGauges(metrics: Metrics, s: StatusSources): void {
  const { health, registry, broker, clock } = s;
  // The four backlog gauges are read in one scrape: one stats query serves them all.
  let cached: { at: number; stats: OutboxStats } | null = null;
  const none: OutboxStats = { pending: 0, oldestPendingAt: null, parked: 0, delivered: 0, lastDeliveryAt: null };
  const stats = (): OutboxStats => {
    const now = clock.monotonic();
    if (!cached || now - cached.at > 1_000) {
      try {
        cached = { at: now, stats: s.outbox.stats() };
      } catch {
        // A damaged database shows in chair_agent_database_writable; the scrape still answers.
        cached = { at: now, stats: none };
      }
    }
    return cached.stats;
  };
  metrics.gauge('chair_agent_up', 'Always 1 while the agent runs', () => 1);
  metrics.gauge('chair_agent_broker_connected', '1 while connected to the broker', () => (broker.connected ? 1 : 0));
  metrics.gauge('chair_agent_mqtt_held_topics', 'Retained topics the broker refused, held back and retried on a backoff', () => s.refusals().held.length);
  metrics.gauge('chair_agent_vendor_reachable', '1 while the last chair list poll succeeded', () => (health.get('vendor').ok ? 1 : 0));
  metrics.gauge('chair_agent_database_writable', '1 while the database takes writes', () => (health.get('database').ok ? 1 : 0));
  metrics.gauge('chair_agent_gpio_ok', '1 while every configured GPIO line works', () => (health.get('gpio').ok ? 1 : 0));
  const seconds = (t: number | null): number | null => (t === null ? null : t / 1000);
  metrics.gauge('chair_agent_last_poll_timestamp_seconds', 'Time of the last successful poll', () => seconds(health.lastPollAt));
  metrics.gauge('chair_agent_last_sync_timestamp_seconds', 'Time of the last completed transaction sync', () => seconds(health.lastSyncAt));
  metrics.labelledGauge('chair_agent_chair_online', '1 while the chair is in a fresh list', 'device_id', () =>
    registry.views().map((v) => [v.deviceId, v.online ? 1 : 0]),
  );
  metrics.labelledGauge('chair_agent_chair_running', '1 while the chair runs a session', 'device_id', () =>
    registry.views().map((v) => [v.deviceId, v.state?.running ? 1 : 0]),
  );
  metrics.gauge('chair_agent_outbox_pending', 'Transactions waiting for the broker', () => stats().pending);
  metrics.gauge('chair_agent_outbox_oldest_pending_age_seconds', 'Age of the oldest waiting transaction', () => {
    const oldest = stats().oldestPendingAt;
    return oldest === null ? 0 : (clock.now() - oldest) / 1000;
  });
  metrics.gauge('chair_agent_outbox_parked', 'Waiting transactions set aside because the broker refused them; retried later', () => stats().parked);
  metrics.gauge('chair_agent_outbox_delivered', 'Delivered transactions still kept (retention)', () => stats().delivered);
  metrics.gauge('chair_agent_outbox_last_delivery_timestamp_seconds', 'Time of the last PUBACKed transaction', () => seconds(stats().lastDeliveryAt));
  metrics.gauge('chair_agent_outbox_inflight', 'Transactions sent and awaiting PUBACK', () => s.inFlight());
}
