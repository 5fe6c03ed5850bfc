import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * The agent's Prometheus metrics, in a registry of its own. Gauges that mirror state read it at
 * scrape time (`collect`), so nothing is computed between scrapes.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly vendorRequests: Counter<'endpoint' | 'outcome'>;
  readonly vendorDuration: Histogram<'endpoint'>;
  readonly polls: Counter<'outcome'>;
  readonly mqttPublished: Counter<'kind'>;
  readonly webhookRequests: Counter<'status'>;
  readonly syncRuns: Counter<'outcome'>;
  readonly syncRecords: Counter<'outcome'>;
  readonly starts: Counter<'source' | 'outcome'>;
  readonly buttonPresses: Counter<'device_id'>;
  readonly parked: Counter;
  readonly refused: Counter<'what' | 'status'>;

  constructor(options: { defaultMetrics?: boolean } = {}) {
    const r = this.registry;
    // The event loop lag monitor ticks at this resolution; prom-client's 10 ms default keeps an
    // idle agent waking 100 times a second (about 30 CPU-seconds an hour). The systemd watchdog
    // catches a blocked loop; this metric only needs to show lag trends.
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: r, eventLoopMonitoringPrecision: 1000 });
    this.vendorRequests = new Counter({
      name: 'chair_agent_vendor_requests_total',
      help: 'Requests to the vendor API by endpoint and outcome (HTTP status or error code)',
      labelNames: ['endpoint', 'outcome'],
      registers: [r],
    });
    this.vendorDuration = new Histogram({
      name: 'chair_agent_vendor_request_duration_seconds',
      help: 'Duration of vendor API requests',
      labelNames: ['endpoint'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [r],
    });
    this.polls = new Counter({ name: 'chair_agent_polls_total', help: 'Chair list polls by outcome', labelNames: ['outcome'], registers: [r] });
    this.mqttPublished = new Counter({
      name: 'chair_agent_mqtt_published_total',
      help: 'Messages acknowledged by the broker, by kind',
      labelNames: ['kind'],
      registers: [r],
    });
    this.webhookRequests = new Counter({
      name: 'chair_agent_webhook_requests_total',
      help: 'Webhook requests by HTTP status answered',
      labelNames: ['status'],
      registers: [r],
    });
    this.syncRuns = new Counter({ name: 'chair_agent_sync_runs_total', help: 'Transaction sync runs by outcome', labelNames: ['outcome'], registers: [r] });
    this.syncRecords = new Counter({
      name: 'chair_agent_sync_records_total',
      help: 'Transaction records read by sync: new, known, rejected',
      labelNames: ['outcome'],
      registers: [r],
    });
    this.starts = new Counter({
      name: 'chair_agent_starts_total',
      help: 'Chair starts by source (button, mqtt, cli) and outcome',
      labelNames: ['source', 'outcome'],
      registers: [r],
    });
    this.buttonPresses = new Counter({
      name: 'chair_agent_button_presses_total',
      help: 'Debounced button presses',
      labelNames: ['device_id'],
      registers: [r],
    });
    this.parked = new Counter({
      name: 'chair_agent_outbox_parked_total',
      help: 'Transactions set aside because the broker refused them (or dropped the connection on them)',
      registers: [r],
    });
    this.refused = new Counter({
      name: 'chair_agent_refused_requests_total',
      help: 'Requests and commands refused, by what (webhook, start, http) and why',
      labelNames: ['what', 'status'],
      registers: [r],
    });
  }

  /** A gauge whose value is read from the agent's state at scrape time. */
  gauge(name: string, help: string, read: () => number | null): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        const v = read();
        if (v !== null) this.set(v);
      },
    });
  }

  /** A labelled gauge read at scrape time. */
  labelledGauge(name: string, help: string, label: string, read: () => [string, number][]): void {
    new Gauge({
      name,
      help,
      labelNames: [label],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [value, n] of read()) this.set({ [label]: value }, n);
      },
    });
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
