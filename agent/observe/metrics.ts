import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { monitorEventLoopDelay, PerformanceObserver, type ELDHistogram } from 'node:perf_hooks';

/**
 * The agent's Prometheus metrics (text exposition format 0.0.4). Counters and one histogram kept
 * as they happen; gauges that mirror state read it at scrape time, so nothing is computed between
 * scrapes. Written here rather than with prom-client: the dozen series the agent has do not need
 * its registry, cluster aggregation and GC observers, which cost about 1.5 MB of a Pi's memory and
 * a wakeup per second (see docs/ARCHITECTURE.md).
 */
type LabelValues<L extends string> = Partial<Record<L, string | number>>;

const escapeLabel = (v: string): string => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
const escapeHelp = (v: string): string => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
const number = (v: number): string => (Number.isNaN(v) ? 'NaN' : v === Infinity ? '+Inf' : v === -Infinity ? '-Inf' : String(v));

function labelText(names: readonly string[], values: Record<string, string | number | undefined>, extra = ''): string {
  const parts = names.filter((n) => values[n] !== undefined).map((n) => `${n}="${escapeLabel(String(values[n]))}"`);
  if (extra) parts.push(extra);
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}

interface Family {
  render(): string;
}

function header(name: string, help: string, type: string): string {
  return `# HELP ${name} ${escapeHelp(help)}\n# TYPE ${name} ${type}\n`;
}

export class Counter<L extends string = never> implements Family {
  private readonly series = new Map<string, { labels: LabelValues<L>; value: number }>();

  constructor(private readonly name: string, private readonly help: string, private readonly labelNames: readonly L[] = []) {}

  inc(labels?: LabelValues<L> | number, value = 1): void {
    const [l, v] = typeof labels === 'number' ? [{} as LabelValues<L>, labels] : [labels ?? ({} as LabelValues<L>), value];
    const key = labelText(this.labelNames, l);
    const s = this.series.get(key);
    if (s) s.value += v;
    else this.series.set(key, { labels: l, value: v });
  }

  render(): string {
    let out = header(this.name, this.help, 'counter');
    if (this.series.size === 0 && this.labelNames.length === 0) out += `${this.name} 0\n`;
    for (const [key, s] of this.series) out += `${this.name}${key} ${number(s.value)}\n`;
    return out;
  }
}

export class Histogram<L extends string = never> implements Family {
  private readonly series = new Map<string, { labels: LabelValues<L>; counts: number[]; sum: number; count: number }>();

  constructor(
    private readonly name: string,
    private readonly help: string,
    private readonly labelNames: readonly L[],
    private readonly buckets: readonly number[],
  ) {}

  observe(labels: LabelValues<L>, value: number): void {
    const key = labelText(this.labelNames, labels);
    let s = this.series.get(key);
    if (!s) this.series.set(key, (s = { labels, counts: this.buckets.map(() => 0), sum: 0, count: 0 }));
    for (let i = 0; i < this.buckets.length; i++) if (value <= (this.buckets[i] as number)) (s.counts[i] as number)++;
    s.sum += value;
    s.count++;
  }

  render(): string {
    let out = header(this.name, this.help, 'histogram');
    for (const [key, s] of this.series) {
      const l = s.labels as Record<string, string | number | undefined>;
      this.buckets.forEach((b, i) => (out += `${this.name}_bucket${labelText(this.labelNames, l, `le="${number(b)}"`)} ${s.counts[i]}\n`));
      out += `${this.name}_bucket${labelText(this.labelNames, l, 'le="+Inf"')} ${s.count}\n`;
      out += `${this.name}_sum${key} ${number(s.sum)}\n${this.name}_count${key} ${s.count}\n`;
    }
    return out;
  }
}

class ReadGauge implements Family {
  constructor(
    private readonly name: string,
    private readonly help: string,
    private readonly label: string | null,
    private readonly read: () => [string | null, number][],
    private readonly type = 'gauge',
  ) {}

  render(): string {
    let out = header(this.name, this.help, this.type);
    for (const [value, n] of this.read()) {
      out += `${this.name}${this.label !== null && value !== null ? `{${this.label}="${escapeLabel(value)}"}` : ''} ${number(n)}\n`;
    }
    return out;
  }
}

/** A family of several labels read at scrape time (the day's figures by chair and payment method). */
class ReadFamily<L extends string> implements Family {
  constructor(
    private readonly name: string,
    private readonly help: string,
    private readonly type: 'gauge' | 'counter',
    private readonly labelNames: readonly L[],
    private readonly read: () => [Record<L, string>, number][],
  ) {}

  render(): string {
    let out = header(this.name, this.help, this.type);
    for (const [labels, n] of this.read()) out += `${this.name}${labelText(this.labelNames, labels)} ${number(n)}\n`;
    return out;
  }
}

/** The event loop sampler's period once scraped (prom-client's is 10 ms). */
const LAG_RESOLUTION_MS = 20;

/** A /proc/self/status field in bytes (VmSize, VmData...), or none off Linux. */
function procStatusBytes(field: string): [null, number][] {
  try {
    const kb = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
    return kb === undefined ? [] : [[null, Number(kb) * 1024]];
  } catch {
    return [];
  }
}

/** The soft limit on open files, from /proc/self/limits. */
function maxFds(): [null, number][] {
  try {
    const n = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1];
    return n === undefined ? [] : [[null, Number(n)]];
  } catch {
    return [];
  }
}

/** Counts by type of what keeps the event loop alive (handles, requests, timers). */
function activeResources(): [string, number][] {
  const counts = new Map<string, number>();
  for (const type of process.getActiveResourcesInfo()) counts.set(type, (counts.get(type) ?? 0) + 1);
  return [...counts];
}

const GC_KINDS: Record<number, string> = { 1: 'minor', 2: 'major', 4: 'incremental', 8: 'weakcb' };

export class Metrics {
  private readonly families: Family[] = [];
  private lag: ELDHistogram | null = null;
  /** Garbage collections by kind, observed from the first scrape on. */
  private readonly gcDuration = new Histogram('nodejs_gc_duration_seconds', 'Garbage collection duration by kind, one of major, minor, incremental or weakcb.', ['kind'], [0.001, 0.01, 0.1, 1, 2, 5]);
  private gcObserver: PerformanceObserver | null = null;
  private v8: { getHeapSpaceStatistics(): { space_name: string; space_size: number; space_used_size: number; space_available_size: number }[] } | null = null;
  /** How long a setImmediate waited at the last scrape (prom-client's nodejs_eventloop_lag_seconds). */
  private immediateLag: number | null = null;
  readonly vendorRequests = this.add(new Counter('chair_agent_vendor_requests_total', 'Requests to the vendor API by endpoint and outcome (HTTP status or error code)', ['endpoint', 'outcome']));
  readonly vendorDuration = this.add(new Histogram('chair_agent_vendor_request_duration_seconds', 'Duration of vendor API requests', ['endpoint'], [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]));
  readonly polls = this.add(new Counter('chair_agent_polls_total', 'Chair list polls by outcome', ['outcome']));
  readonly mqttPublished = this.add(new Counter('chair_agent_mqtt_published_total', 'Messages acknowledged by the broker, by kind', ['kind']));
  readonly webhookRequests = this.add(new Counter('chair_agent_webhook_requests_total', 'Webhook requests by HTTP status answered', ['status']));
  readonly syncRuns = this.add(new Counter('chair_agent_sync_runs_total', 'Transaction sync runs by outcome', ['outcome']));
  readonly syncRecords = this.add(new Counter('chair_agent_sync_records_total', 'Transaction records read by sync: new, known, rejected', ['outcome']));
  readonly starts = this.add(new Counter('chair_agent_starts_total', 'Chair starts by source (button, mqtt, cli) and outcome', ['source', 'outcome']));
  readonly buttonPresses = this.add(new Counter('chair_agent_button_presses_total', 'Debounced button presses', ['device_id']));
  readonly parked = this.add(new Counter('chair_agent_outbox_parked_total', 'Transactions set aside because the broker refused them (or dropped the connection on them)'));
  readonly mqttRefused = this.add(new Counter('chair_agent_mqtt_refused_total', 'Publishes the broker refused (MQTT 5 reason code >= 0x80) or the agent could not send, by topic class', ['class']));
  readonly refused = this.add(new Counter('chair_agent_refused_requests_total', 'Requests and commands refused, by what (webhook, start, http) and why', ['what', 'status']));

  constructor(private readonly options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics ?? true) this.addProcessMetrics();
  }

  private add<F extends Family>(family: F): F {
    this.families.push(family);
    return family;
  }

  /** A gauge whose value is read from the agent's state at scrape time. */
  gauge(name: string, help: string, read: () => number | null): void {
    this.add(new ReadGauge(name, help, null, () => {
      const v = read();
      return v === null ? [] : [[null, v]];
    }));
  }

  /** A labelled gauge read at scrape time. */
  labelledGauge(name: string, help: string, label: string, read: () => [string, number][]): void {
    this.add(new ReadGauge(name, help, label, read));
  }

  /** A family with several labels read at scrape time; a counter may go back to 0 (a new day), as Prometheus allows. */
  readFamily<L extends string>(name: string, help: string, type: 'gauge' | 'counter', labelNames: readonly L[], read: () => [Record<L, string>, number][]): void {
    this.add(new ReadFamily(name, help, type, labelNames, read));
  }

  /** What prom-client's default metrics gave that an operator uses, read at scrape time. */
  private addProcessMetrics(): void {
    const started = Date.now() / 1000 - process.uptime();
    const cpu = (pick: (c: NodeJS.CpuUsage) => number) => (): [null, number][] => [[null, pick(process.cpuUsage()) / 1e6]];
    this.add(new ReadGauge('process_cpu_user_seconds_total', 'Total user CPU time spent in seconds.', null, cpu((c) => c.user), 'counter'));
    this.add(new ReadGauge('process_cpu_system_seconds_total', 'Total system CPU time spent in seconds.', null, cpu((c) => c.system), 'counter'));
    this.add(new ReadGauge('process_cpu_seconds_total', 'Total user and system CPU time spent in seconds.', null, cpu((c) => c.user + c.system), 'counter'));
    this.add(new ReadGauge('process_start_time_seconds', 'Start time of the process since unix epoch in seconds.', null, () => [[null, Math.round(started)]]));
    this.add(new ReadGauge('process_resident_memory_bytes', 'Resident memory size in bytes.', null, () => [[null, process.memoryUsage.rss()]]));
    this.add(new ReadGauge('process_open_fds', 'Number of open file descriptors.', null, () => {
      try {
        return [[null, readdirSync('/proc/self/fd').length]];
      } catch {
        return [];
      }
    }));
    const memory = (pick: (m: NodeJS.MemoryUsage) => number) => (): [null, number][] => [[null, pick(process.memoryUsage())]];
    this.add(new ReadGauge('nodejs_heap_size_total_bytes', 'Process heap size from Node.js in bytes.', null, memory((m) => m.heapTotal)));
    this.add(new ReadGauge('nodejs_heap_size_used_bytes', 'Process heap size used from Node.js in bytes.', null, memory((m) => m.heapUsed)));
    this.add(new ReadGauge('nodejs_external_memory_bytes', 'Node.js external memory size in bytes.', null, memory((m) => m.external)));
    // The rest of prom-client's default families, which dashboards are built on.
    this.add(new ReadGauge('process_virtual_memory_bytes', 'Virtual memory size in bytes.', null, () => procStatusBytes('VmSize')));
    this.add(new ReadGauge('process_heap_bytes', 'Process heap size in bytes.', null, () => procStatusBytes('VmData')));
    this.add(new ReadGauge('process_max_fds', 'Maximum number of open file descriptors.', null, maxFds));
    // prom-client's labelled families; its *_total twins are gauges named like counters, which
    // promtool refuses (the contract says /metrics passes it): sum() over these gives the same.
    this.add(new ReadGauge('nodejs_active_resources', 'Number of active resources that are currently keeping the event loop alive, grouped by async resource type.', 'type', activeResources));
    const legacy = process as unknown as { _getActiveHandles?: () => object[]; _getActiveRequests?: () => object[] };
    const byType = (list: (() => object[]) | undefined) => (): [string, number][] => {
      const counts = new Map<string, number>();
      for (const h of list?.call(process) ?? []) counts.set(h.constructor?.name ?? 'unknown', (counts.get(h.constructor?.name ?? 'unknown') ?? 0) + 1);
      return [...counts];
    };
    this.add(new ReadGauge('nodejs_active_handles', 'Number of active libuv handles grouped by handle type. Every handle type is C++ class name.', 'type', byType(legacy._getActiveHandles)));
    this.add(new ReadGauge('nodejs_active_requests', 'Number of active libuv requests grouped by request type. Every request type is C++ class name.', 'type', byType(legacy._getActiveRequests)));
    // Heap spaces come from node:v8, loaded at the first scrape: a box nobody scrapes never pays for it.
    const spaces = (pick: (s: { space_size: number; space_used_size: number; space_available_size: number }) => number) => (): [string, number][] =>
      this.heapSpaces().map((sp) => [sp.space_name.replace(/_space$/, ''), pick(sp)]);
    this.add(new ReadGauge('nodejs_heap_space_size_total_bytes', 'Process heap space size total from Node.js in bytes.', 'space', spaces((sp) => sp.space_size)));
    this.add(new ReadGauge('nodejs_heap_space_size_used_bytes', 'Process heap space size used from Node.js in bytes.', 'space', spaces((sp) => sp.space_used_size)));
    this.add(new ReadGauge('nodejs_heap_space_size_available_bytes', 'Process heap space size available from Node.js in bytes.', 'space', spaces((sp) => sp.space_available_size)));
    this.add(this.gcDuration);
    this.add(new ReadGauge('nodejs_eventloop_lag_seconds', 'Lag of event loop in seconds.', null, () => (this.immediateLag === null ? [] : [[null, this.immediateLag]])));
    // Sampled from the first scrape on, reset at each scrape: lag since the last. The histogram
    // records each sampling interval whole (prom-client's read 0.01 s on an idle loop; a 1 s
    // resolution read 1 s, and every lag alert fired): the interval is taken off, so an idle
    // loop reads about 0.
    const lag = (pick: (h: ELDHistogram) => number) => (): [null, number][] => {
      if (!this.lag || this.lag.count === 0) return [];
      const v = Math.max(0, pick(this.lag) - LAG_RESOLUTION_MS * 1e6) / 1e9;
      return Number.isFinite(v) ? [[null, v]] : [];
    };
    this.add(new ReadGauge('nodejs_eventloop_lag_mean_seconds', 'Mean of event loop lag since the last scrape.', null, lag((h) => h.mean)));
    this.add(new ReadGauge('nodejs_eventloop_lag_p99_seconds', 'The 99th percentile of event loop lag since the last scrape.', null, lag((h) => h.percentile(99))));
    this.add(new ReadGauge('nodejs_eventloop_lag_max_seconds', 'Maximum event loop lag since the last scrape.', null, lag((h) => h.max)));
    this.add(new ReadGauge('nodejs_eventloop_lag_min_seconds', 'The minimum recorded event loop delay.', null, lag((h) => h.min)));
    this.add(new ReadGauge('nodejs_eventloop_lag_stddev_seconds', 'The standard deviation of the recorded event loop delays.', null, () => (this.lag && this.lag.count > 0 ? [[null, this.lag.stddev / 1e9]] : [])));
    this.add(new ReadGauge('nodejs_eventloop_lag_p50_seconds', 'The 50th percentile of the recorded event loop delays.', null, lag((h) => h.percentile(50))));
    this.add(new ReadGauge('nodejs_eventloop_lag_p90_seconds', 'The 90th percentile of the recorded event loop delays.', null, lag((h) => h.percentile(90))));
    const [major, minor, patch] = process.versions.node.split('.');
    const version = `${header('nodejs_version_info', 'Node.js version info.', 'gauge')}nodejs_version_info{version="${process.version}",major="${major}",minor="${minor}",patch="${patch}"} 1\n`;
    this.add({ render: () => version });
  }

  private heapSpaces(): { space_name: string; space_size: number; space_used_size: number; space_available_size: number }[] {
    this.v8 ??= createRequire(import.meta.url)('node:v8') as NonNullable<Metrics['v8']>;
    return this.v8.getHeapSpaceStatistics();
  }

  async text(): Promise<string> {
    const defaults = this.options.defaultMetrics ?? true;
    if (defaults) {
      const start = process.hrtime.bigint();
      await new Promise((resolve) => setImmediate(resolve));
      this.immediateLag = Number(process.hrtime.bigint() - start) / 1e9;
    }
    const lagging = this.lag !== null;
    const text = this.families.map((f) => f.render()).join('\n');
    if (defaults) {
      if (lagging) this.lag?.reset();
      else {
        this.lag = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
        this.lag.enable();
      }
      if (!this.gcObserver) {
        this.gcObserver = new PerformanceObserver((list) => {
          for (const e of list.getEntries()) {
            const kind = GC_KINDS[((e as { detail?: { kind?: number } }).detail)?.kind ?? 0] ?? 'unknown';
            this.gcDuration.observe({ kind }, e.duration / 1000);
          }
        });
        this.gcObserver.observe({ entryTypes: ['gc'] });
      }
    }
    return text;
  }

  /** Stops the event loop sampler, if a scrape started it. */
  close(): void {
    this.lag?.disable();
    this.lag = null;
    this.gcObserver?.disconnect();
    this.gcObserver = null;
  }

  get contentType(): string {
    return 'text/plain; version=0.0.4; charset=utf-8';
  }
}
