import { systemClock, within, type Clock } from './platform/clock.js';
import type { Logger } from './platform/logger.js';
import type { Config } from './config/schema.js';
import { ChairRegistry } from './core/chair-registry.js';
import { Health } from './observe/health.js';
import { Metrics } from './observe/metrics.js';
import { errorMessage } from './platform/errors.js';
import { agentVersion } from './platform/version.js';
import { bridgeInfo, registerGauges, shortBridgeInfo } from './observe/agent-status.js';
import { TodaySummary } from './summary/today.js';
import { registerTodayMetrics } from './summary/today-metrics.js';
import type { Component } from './platform/component.js';
import { Poller } from './vendor/poller.js';
import { webhookHandler } from './http/webhook.js';
import { GroupCommit } from './store/group-commit.js';
import { BRIDGE_API_SHORT_ANSWERS, bridgeApiHandlers } from './mqtt/bridge-api.js';
import { locationFilter } from './core/location.js';
import { BridgeRequests } from './mqtt/bridge-requests.js';
import { HaDiscovery } from './mqtt/ha-discovery.js';
import { BrokerSizeLimit } from './mqtt/size-limit.js';
import { StartCorrelation, StartCorrelationFeed } from './start/start-correlation.js';
import { StatusPage } from './http/status-page.js';
import { clientAddressFrom } from './http/client-address.js';
import { TransactionSync } from './vendor/transaction-sync.js';
import { OutboxPublisher } from './delivery/outbox-publisher.js';
import { Retention } from './store/retention.js';
import { LedController } from './gpio/leds.js';
import { Buttons } from './gpio/buttons.js';
import { Indicators } from './gpio/indicators.js';
import type { HttpListener } from './http/listener.js';
import { listenersFromConfig } from './http/listeners-from-config.js';
import { sendJson } from './http/body.js';
import type { Broker } from './mqtt/broker.js';
import { RefusalGuard } from './mqtt/refusal-guard.js';
import { MqttBridge } from './mqtt/bridge.js';
import { MqttStartCommands } from './mqtt/start-commands.js';
import { RequestBudget } from './mqtt/request-budget.js';
import { Topics } from './mqtt/topics.js';
import type { TransactionRecord, VendorApi } from './vendor/vendor-api.js';
import { Outbox } from './store/outbox.js';
import { monotonicScheduler, type Scheduler } from './time/scheduler.js';
import { VendorClock } from './time/vendor-clock.js';
import type { GpioDriver } from './gpio/gpio-driver.js';
import { SimGpioDriver } from './gpio/sim-driver.js';
import { simGpioRoutes } from './gpio/sim-routes.js';
import type { StartService } from './start/start-service.js';
import { vendorFromConfig } from './vendor/vendor-from-config.js';
import { brokerFromConfig } from './mqtt/broker-from-config.js';
import { buttonBias, buttonSpecs, gpioFromConfig, ledSpecs } from './gpio/gpio-from-config.js';
import { GpioHealthCheck, GpioLines } from './gpio/gpio-lines.js';
import { StoreComponent } from './store/store-component.js';
import { startServiceFor } from './start/start-service-from-config.js';
import { registryFor } from './core/registry-from-config.js';

/** The whole stop must fit in the 10 s the interface allows, with room to spare. */
const STOP_BUDGET_MS = 9_000;

/** What the agent is built from. Anything left out is made from the config. */
export interface AgentDeps {
  logger: Logger;
  clock?: Clock;
  vendor?: VendorApi;
  broker?: Broker;
  metrics?: Metrics;
  outbox?: Outbox;
  scheduler?: Scheduler;
  gpio?: GpioDriver;
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
  /** The listener that serves the webhook: `http`, or its own with `webhook.port`. */
  readonly webhookHttp: HttpListener;
  readonly poller: Poller;
  readonly bridge: MqttBridge;
  readonly outbox: Outbox;
  readonly sync: TransactionSync;
  readonly publisher: OutboxPublisher;
  readonly starts: StartService;
  readonly gpio: GpioDriver;
  readonly leds: LedController;
  readonly buttons: Buttons;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** The composition root: every component, wired, not yet started. */
export function build(config: Config, deps: AgentDeps): Agent {
  const logger = deps.logger;
  const clock = deps.clock ?? systemClock;
  const metrics = deps.metrics ?? new Metrics();
  const child = (component: string): Logger => logger.child({ component });
  const health = new Health(clock);
  const topics = new Topics(config.mqtt.baseTopic, config.site.id);
  const vendor = deps.vendor ?? vendorFromConfig(config, clock, logger, metrics);
  const guard = new RefusalGuard({
    inner: deps.broker ?? brokerFromConfig(config, topics, logger, clock),
    classify: (topic) => topics.classify(topic, config.homeassistant.discoveryPrefix),
    clock,
    logger: child('mqtt'),
    onRefusal: (topicClass) => metrics.mqttRefused.inc({ class: topicClass }),
  });
  const broker: Broker = guard;
  const outbox = deps.outbox ?? new Outbox({ path: config.storage.path, maxSizeMb: config.storage.maxSizeMb, worker: true });
  const scheduler = deps.scheduler ?? monotonicScheduler(config.site.timezone, clock, child('scheduler'));
  const vendorClock = new VendorClock();
  const location = locationFilter(config.vendor.location);
  const correlation = new StartCorrelation(clock, vendorClock, config.site.timezone);
  const annotate = (r: TransactionRecord): string | null => correlation.annotate(r);
  const gpio = deps.gpio ?? gpioFromConfig(config, clock, logger);
  const registry = registryFor(config);

  const { http, webhook: webhookHttp } = listenersFromConfig(config, clock, metrics, logger);
  const poller = new Poller({
    vendor,
    registry,
    health,
    clock,
    vendorClock,
    logger: child('poller'),
    periodMs: config.vendor.pollSeconds * 1000,
    maxRetryAfterMs: config.vendor.maxRetryAfterSeconds * 1000,
    timeZone: config.site.timezone,
    onPoll: (ok) => metrics.polls.inc({ outcome: ok ? 'ok' : 'error' }),
    keepChair: location?.chair,
  });
  const sync = new TransactionSync({
    vendor,
    outbox,
    scheduler,
    clock,
    vendorClock,
    logger: child('sync'),
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
    keep: location?.record,
    annotate,
    firstRunDelayMs: 1_000,
  });
  const publisher = new OutboxPublisher({
    outbox,
    broker,
    topics,
    clock,
    logger: child('publisher'),
    metrics,
    siteId: config.site.id,
    timeZone: config.site.timezone,
    maxInflight: config.mqtt.maxInflight,
    ackTimeoutMs: config.mqtt.ackTimeoutSeconds * 1000,
  });
  const retention = new Retention({ outbox, scheduler, clock, logger: child('retention'), retentionDays: config.storage.retentionDays });
  const sizeLimit = new BrokerSizeLimit(broker);
  const today = new TodaySummary({ source: outbox, broker, topic: topics.summary, chairTopic: (id) => topics.chairToday(id), chairs: registry, sizeLimit, clock, vendorClock, timeZone: config.site.timezone, currency: config.site.currency, logger: child('today') });
  const site = { siteId: config.site.id, timeZone: config.site.timezone, vendorBaseUrl: config.vendor.baseUrl, gpioDriver: config.gpio.driver };
  const sources = { site, clock, health, registry, broker, outbox, inFlight: () => publisher.inFlight, refusals: () => guard.refusals(), today: () => today.summary(), webhookCertificate: () => webhookHttp.certificateStatus() };
  const bridge = new MqttBridge({ broker, topics, registry, health, clock, logger: child('bridge'), infoIntervalMs: 60_000, info: () => bridgeInfo(sources), sizeLimit, shortInfo: shortBridgeInfo, store: outbox.state, backlog: outbox });
  const starts = startServiceFor(config, { vendor, registry, clock, logger, metrics });
  const requestBudget = new RequestBudget({ clock });
  const startCommands = new MqttStartCommands({
    broker,
    topics,
    starts,
    logger: child('start-commands'),
    metrics,
    clock,
    budget: requestBudget,
    minMinutes: config.start.minMinutes,
    maxMinutes: config.start.maxMinutes,
    knownChairs: () => registry.knownIds(),
  });
  const correlating = new StartCorrelationFeed(correlation, starts);
  const bridgeRequests = new BridgeRequests({
    broker,
    topics,
    logger: child('bridge-requests'),
    metrics,
    clock,
    budget: requestBudget,
    handlers: bridgeApiHandlers({ ...sources, sync, topics, rootLogger: logger, logger: child('bridge-requests') }),
    shortAnswers: BRIDGE_API_SHORT_ANSWERS,
  });
  const homeassistant: Component[] = config.homeassistant.enabled
    ? [
        new HaDiscovery({
          broker,
          sizeLimit,
          clock,
          topics,
          registry,
          store: outbox.state,
          logger: child('homeassistant'),
          prefix: config.homeassistant.discoveryPrefix,
          siteId: config.site.id,
          version: agentVersion(),
          supportUrl: config.homeassistant.supportUrl,
          configured: config.gpio.chairs.map((c) => c.deviceId),
          webhookHttps: config.webhook.enabled && config.webhook.port !== undefined && config.webhook.cert !== undefined,
          currency: config.site.currency,
        }),
      ]
    : [];

  const ledLines = ledSpecs(config);
  const buttonLines = buttonSpecs(config);
  const gpioLog = child('gpio');
  const gpioLines = new GpioLines({ driver: gpio, health, logger: gpioLog, lineCount: ledLines.length + buttonLines.length });
  const leds = new LedController({ driver: gpio, clock, logger: gpioLog, specs: ledLines, ready: () => gpioLines.ready });
  const buttons = new Buttons({
    driver: gpio,
    ready: () => gpioLines.ready,
    specs: buttonLines,
    input: { activeLow: config.gpio.activeLow, debounceMs: config.gpio.debounceMs, bias: buttonBias(config) },
    onFailure: () => gpioCheck.lineFailed(),
    starts,
    logger: gpioLog,
    metrics,
  });
  const gpioCheck = new GpioHealthCheck({ lines: gpioLines, driver: gpio, buttons, leds, health, counts: { buttons: buttonLines.length, leds: ledLines.length } });
  const indicators = new Indicators({ leds, registry, starts, health, chairs: config.gpio.chairs.map((c) => c.deviceId) });
  const statusPage = new StatusPage({
    ...sources,
    adminToken: config.http.adminToken,
    startMinutes: { min: config.start.minMinutes, max: config.start.maxMinutes, default: config.vendor.sessionMinutes },
    starts,
    leds,
    indicators,
    logger: child('status-page'),
    httpRefusals: http.refusals,
    clientAddress: clientAddressFrom(config.http.trustedProxies),
    embedOrigins: config.http.embedOrigins,
  });
  statusPage.routes(http);
  const webhookCommits = new GroupCommit(outbox, 'webhook', clock, annotate);
  const store = new StoreComponent({ outbox, commits: webhookCommits, health, clock, logger: child('store') });

  if (config.webhook.enabled && config.webhook.channelSecret) {
    webhookHttp.route('POST', config.webhook.path, webhookHandler({ secret: config.webhook.channelSecret, commits: webhookCommits, keep: location?.record, logger: child('webhook'), metrics, refusals: webhookHttp.refusals }), 'webhook');
  }
  http.route('GET', '/healthz', (_req, res) => sendJson(res, health.ok ? 200 : 503, health.snapshot()));
  http.route('GET', '/metrics', async (_req, res) => {
    const text = await metrics.text();
    res.writeHead(200, { 'content-type': metrics.contentType });
    res.end(text);
  });
  if (gpio instanceof SimGpioDriver) simGpioRoutes(http, gpio);
  registerGauges(metrics, sources);
  registerTodayMetrics(metrics, sources.today);

  // Start order; stop is the reverse: starts stop coming in, polling stops, a start under way
  // finishes, the offline state is published, the database closes, the GPIO lines are released.
  // Every stop is bounded (starts 4 s, publisher 1 s, bridge 2.5 s, HTTP 1 s): all within 10 s.
  const components: Component[] = [
    gpioLines,
    leds,
    store,
    today,
    http,
    ...(webhookHttp === http ? [] : [webhookHttp]),
    bridge,
    publisher,
    starts,
    poller,
    sync,
    retention,
    indicators,
    buttons,
    gpioCheck,
    correlating,
    statusPage,
    startCommands,
    bridgeRequests,
    ...homeassistant,
  ];
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
    webhookHttp,
    poller,
    bridge,
    outbox,
    sync,
    publisher,
    starts,
    gpio,
    leds,
    buttons,
    async start() {
      for (const c of components) {
        try {
          const t0 = performance.now();
          await c.start();
          logger.debug({ component: c.name, ms: Math.round(performance.now() - t0) }, 'component started');
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
      // Whatever hangs, the database still closes and the GPIO lines are still released in time:
      // each component gets what is left of the budget, and at least a moment. The budget is on
      // the monotonic clock: NTP stepping the wall clock mid-stop must not cut the drain short.
      const deadline = clock.monotonic() + STOP_BUDGET_MS;
      while (started.length > 0) {
        const c = started.pop() as Component;
        let stopping: Promise<void>;
        try {
          stopping = Promise.resolve(c.stop());
        } catch (err) {
          stopping = Promise.reject(err);
        }
        stopping.catch((err: unknown) => logger.error({ component: c.name, err: errorMessage(err) }, 'component failed to stop cleanly'));
        if (!(await within(clock, stopping, Math.max(250, deadline - clock.monotonic())))) {
          logger.error({ component: c.name }, 'component did not stop in time; going on');
        }
      }
      try {
        await vendor.close();
      } catch (err) {
        logger.warn({ err: errorMessage(err) }, 'vendor client did not close cleanly');
      }
      metrics.close();
    },
  };
}
