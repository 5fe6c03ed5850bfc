import { systemClock, type Clock } from './clock.js';
import type { Logger } from './logger.js';
import type { Config } from './config/schema.js';
import { ChairRegistry } from './core/chair-registry.js';
import { formatIsoWithOffset } from './core/vendor-time.js';
import { Health } from './health.js';
import { Metrics } from './metrics.js';
import { errorMessage } from './errors.js';
import { agentVersion } from './version.js';
import type { Component } from './components/component.js';
import { Poller } from './components/poller.js';
import { HttpListener } from './http/listener.js';
import { sendJson } from './http/body.js';
import type { Broker } from './mqtt/broker.js';
import { MqttBroker } from './mqtt/mqtt-broker.js';
import { MqttBridge } from './mqtt/bridge.js';
import { OFFLINE, Topics } from './mqtt/topics.js';
import type { VendorApi } from './vendor/vendor-api.js';
import { UndiciVendorApi } from './vendor/undici-vendor-api.js';
import { Outbox } from './store/outbox.js';
import { cronScheduler, type Scheduler } from './scheduler.js';
import { webhookHandler } from './components/webhook.js';
import { TransactionSync } from './components/transaction-sync.js';
import { OutboxPublisher } from './components/outbox-publisher.js';
import { Retention } from './components/retention.js';

/** What the agent is built from. Anything left out is made from the config. */
export interface AgentDeps {
  logger: Logger;
  clock?: Clock;
  vendor?: VendorApi;
  broker?: Broker;
  metrics?: Metrics;
  outbox?: Outbox;
  scheduler?: Scheduler;
}

export interface Agent {
  readonly config: Config;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly registry: ChairRegistry;
  readonly health: Health;
  readonly metrics: Metrics;
  readonly vendor: VendorApi;
  readonly broker: Broker;
  readonly topics: Topics;
  readonly http: HttpListener;
  readonly poller: Poller;
  readonly bridge: MqttBridge;
  readonly outbox: Outbox;
  readonly sync: TransactionSync;
  readonly publisher: OutboxPublisher;
  readonly retention: Retention;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export function vendorFromConfig(config: Config, clock: Clock, logger: Logger, metrics?: Metrics): VendorApi {
  return new UndiciVendorApi({
    baseUrl: config.vendor.baseUrl,
    apiKey: config.vendor.apiKey,
    timeoutMs: config.vendor.requestTimeoutSeconds * 1000,
    retries: config.vendor.retries,
    clock,
    logger: logger.child({ component: 'vendor' }),
    observe: metrics
      ? (endpoint, outcome, seconds) => {
          metrics.vendorRequests.inc({ endpoint, outcome });
          metrics.vendorDuration.observe({ endpoint }, seconds);
        }
      : undefined,
  });
}

export function brokerFromConfig(config: Config, topics: Topics, logger: Logger): Broker {
  const m = config.mqtt;
  return new MqttBroker({
    url: m.url,
    clientId: m.clientId ?? `chair-agent-${config.site.id}`,
    username: m.username,
    password: m.password,
    ca: m.ca,
    cert: m.cert,
    key: m.key,
    rejectUnauthorized: m.rejectUnauthorized,
    protocolVersion: m.protocolVersion,
    keepaliveSeconds: m.keepaliveSeconds,
    reconnectSeconds: m.reconnectSeconds,
    will: { topic: topics.bridgeState, payload: OFFLINE },
    logger: logger.child({ component: 'mqtt' }),
  });
}

/** The composition root: every component, wired, not yet started. */
export function build(config: Config, deps: AgentDeps): Agent {
  const logger = deps.logger;
  const clock = deps.clock ?? systemClock;
  const metrics = deps.metrics ?? new Metrics();
  const health = new Health(clock);
  const topics = new Topics(config.mqtt.baseTopic, config.site.id);
  const vendor = deps.vendor ?? vendorFromConfig(config, clock, logger, metrics);
  const broker = deps.broker ?? brokerFromConfig(config, topics, logger);
  const periodMs = config.vendor.pollSeconds * 1000;
  const registry = new ChairRegistry({
    timeZone: config.site.timezone,
    availableStatuses: config.vendor.availableStatuses,
    staleAfterMs: 3 * periodMs,
    expected: config.gpio.chairs.map((c) => c.deviceId),
  });
  const iso = (t: number | null): string | null => (t === null ? null : formatIsoWithOffset(t, config.site.timezone));
  const outbox = deps.outbox ?? new Outbox({ path: config.storage.path, maxSizeMb: config.storage.maxSizeMb });
  const scheduler = deps.scheduler ?? cronScheduler(config.site.timezone, logger.child({ component: 'scheduler' }));
  const storeLog = logger.child({ component: 'store' });
  outbox.on('writable', (ok, detail) => {
    health.set('database', ok, detail);
    if (ok) storeLog.info('database writable again');
    else storeLog.error({ err: detail }, 'database not writable; the agent keeps running and keeps what it has stored');
  });
  const backlog = (): Record<string, unknown> => {
    const st = outbox.stats();
    return { pending: st.pending, oldestPendingAt: iso(st.oldestPendingAt), delivered: st.delivered, lastDeliveryAt: iso(st.lastDeliveryAt) };
  };

  const http = new HttpListener({ host: config.http.host, port: config.http.port, logger: logger.child({ component: 'http' }) });
  const poller = new Poller({
    vendor,
    registry,
    health,
    clock,
    logger: logger.child({ component: 'poller' }),
    periodMs,
    onPoll: (ok) => metrics.polls.inc({ outcome: ok ? 'ok' : 'error' }),
  });
  const bridge = new MqttBridge({
    broker,
    topics,
    registry,
    health,
    clock,
    logger: logger.child({ component: 'bridge' }),
    infoIntervalMs: 60_000,
    info: () => ({
      version: agentVersion(),
      siteId: config.site.id,
      startedAt: iso(health.startedAt),
      vendor: { reachable: health.get('vendor').ok, detail: health.get('vendor').detail, baseUrl: config.vendor.baseUrl },
      broker: { url: broker.description, connected: broker.connected },
      lastPollAt: iso(health.lastPollAt),
      lastSyncAt: iso(health.lastSyncAt),
      backlog: backlog(),
      chairs: registry.knownIds().length,
      health: health.ok ? 'ok' : 'degraded',
    }),
  });

  const sync = new TransactionSync({
    vendor,
    outbox,
    scheduler,
    clock,
    logger: logger.child({ component: 'sync' }),
    health,
    metrics,
    settings: {
      schedule: config.transactions.syncSchedule,
      pageSize: config.transactions.pageSize,
      lookbackMs: config.transactions.lookbackHours * 3_600_000,
      overlapMs: config.transactions.overlapMinutes * 60_000,
      windowMs: config.transactions.windowHours * 3_600_000,
      timeFormat: config.transactions.timeFormat,
      timeZone: config.site.timezone,
    },
  });
  const publisher = new OutboxPublisher({
    outbox,
    broker,
    topics,
    clock,
    logger: logger.child({ component: 'publisher' }),
    metrics,
    siteId: config.site.id,
    timeZone: config.site.timezone,
    maxInflight: config.mqtt.maxInflight,
  });
  const retention = new Retention({
    outbox,
    scheduler,
    clock,
    logger: logger.child({ component: 'retention' }),
    retentionDays: config.storage.retentionDays,
  });
  const store: Component = {
    name: 'store',
    start: () => {
      outbox.open();
      health.set('database', true, 'writable');
    },
    stop: () => outbox.close(),
  };
  if (config.webhook.enabled && config.webhook.channelSecret) {
    http.route(
      'POST',
      config.webhook.path,
      webhookHandler({ secret: config.webhook.channelSecret, outbox, clock, logger: logger.child({ component: 'webhook' }), metrics }),
    );
  }
  // bridge/info carries the backlog: refresh it when the backlog moves (coalesced by the bridge).
  outbox.on('inserted', () => bridge.infoSoon());
  outbox.on('delivered', () => bridge.infoSoon());

  http.route('GET', '/healthz', (_req, res) => {
    const snap = health.snapshot();
    sendJson(res, health.ok ? 200 : 503, snap);
  });
  http.route('GET', '/metrics', async (_req, res) => {
    const text = await metrics.text();
    res.writeHead(200, { 'content-type': metrics.contentType });
    res.end(text);
  });
  metrics.gauge('chair_agent_up', 'Always 1 while the agent runs', () => 1);
  metrics.gauge('chair_agent_broker_connected', '1 while connected to the broker', () => (broker.connected ? 1 : 0));
  metrics.gauge('chair_agent_vendor_reachable', '1 while the last chair list poll succeeded', () => (health.get('vendor').ok ? 1 : 0));
  metrics.gauge('chair_agent_last_poll_timestamp_seconds', 'Time of the last successful poll', () =>
    health.lastPollAt === null ? null : health.lastPollAt / 1000,
  );
  metrics.labelledGauge('chair_agent_chair_online', '1 while the chair is in a fresh list', 'device_id', () =>
    registry.views().map((v) => [v.deviceId, v.online ? 1 : 0]),
  );
  metrics.labelledGauge('chair_agent_chair_running', '1 while the chair runs a session', 'device_id', () =>
    registry.views().map((v) => [v.deviceId, v.state?.running ? 1 : 0]),
  );

  metrics.gauge('chair_agent_outbox_pending', 'Transactions waiting for the broker', () => outbox.stats().pending);
  metrics.gauge('chair_agent_outbox_oldest_pending_age_seconds', 'Age of the oldest waiting transaction', () => {
    const oldest = outbox.stats().oldestPendingAt;
    return oldest === null ? 0 : (clock.now() - oldest) / 1000;
  });
  metrics.gauge('chair_agent_outbox_delivered', 'Delivered transactions still kept (retention)', () => outbox.stats().delivered);
  metrics.gauge('chair_agent_outbox_last_delivery_timestamp_seconds', 'Time of the last PUBACKed transaction', () => {
    const last = outbox.stats().lastDeliveryAt;
    return last === null ? null : last / 1000;
  });
  metrics.gauge('chair_agent_outbox_inflight', 'Transactions sent and awaiting PUBACK', () => publisher.inFlight);
  metrics.gauge('chair_agent_last_sync_timestamp_seconds', 'Time of the last completed transaction sync', () =>
    health.lastSyncAt === null ? null : health.lastSyncAt / 1000,
  );

  // Start order; stop is the reverse.
  const components: Component[] = [store, http, bridge, publisher, poller, sync, retention];
  const started: Component[] = [];

  return {
    config,
    logger,
    clock,
    registry,
    health,
    metrics,
    vendor,
    broker,
    topics,
    http,
    poller,
    bridge,
    outbox,
    sync,
    publisher,
    retention,
    async start() {
      for (const c of components) {
        try {
          await c.start();
          started.push(c);
        } catch (err) {
          logger.error({ component: c.name, err: errorMessage(err) }, 'component failed to start');
          await this.stop();
          throw err;
        }
      }
      logger.info({ version: agentVersion(), site: config.site.id, chairs: config.gpio.chairs.length }, 'agent started');
    },
    async stop() {
      while (started.length > 0) {
        const c = started.pop() as Component;
        try {
          await c.stop();
        } catch (err) {
          logger.error({ component: c.name, err: errorMessage(err) }, 'component failed to stop cleanly');
        }
      }
      try {
        await vendor.close();
      } catch (err) {
        logger.warn({ err: errorMessage(err) }, 'vendor client did not close cleanly');
      }
    },
  };
}
