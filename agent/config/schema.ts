import * as z from 'zod/mini';
import { en } from 'zod/locales';
import { validateDetailed } from 'node-cron';
import { isValidTimeZone } from '../time/vendor-time.js';
import { isAddressOrRange } from '../http/client-address.js';

/**
 * The configuration file, as one schema. The TypeScript type, the defaults, the validation and
 * config/schema.json all come from here.
 *
 * Written with zod/mini, not zod's chained API: the same parser and issues, but a classic schema
 * hangs some forty methods on every node it builds and pulls in all of zod. Loading, building and
 * first running this schema is on the way to every start's first chair state (docs/ARCHITECTURE.md,
 * "Start-up and memory"), and mini does it in about a quarter of the time.
 */

// zod's chained API sets English messages for the issues the schema words no message for (an
// invalid URL, say); mini leaves that to us.
z.config(en());

/** A copy of the schema with its description (zod's `.describe()`: the JSON Schema shows it). */
function described<T extends z.ZodMiniType>(schema: T, description: string): T {
  const copy = schema.clone();
  z.globalRegistry.add(copy, { description });
  return copy;
}

const BCM_PIN_MAX = 27;
const int = (...checks: z.core.$ZodCheck<number>[]) => z.number().check(z.int(), ...checks);
const pin = described(int(z.minimum(0), z.maximum(BCM_PIN_MAX)), 'BCM pin number as printed on the Pi pinout');
const positive = (...checks: z.core.$ZodCheck<number>[]) => z.number().check(z.positive(), ...checks);
const text = (...checks: z.core.$ZodCheck<string>[]) => z.string().check(...checks);

/** A URL with one of these schemes and a host. */
const urlWith =
  (...protocols: string[]) =>
  (s: string): boolean => {
    try {
      const u = new URL(s);
      return protocols.includes(u.protocol) && u.hostname !== '';
    } catch {
      return false;
    }
  };
const isHttpUrl = urlWith('http:', 'https:');
/** An origin as CSP's frame-ancestors names one: scheme, host, port, and nothing after. */
const isWebOrigin = (value: string): boolean => {
  try {
    const u = new URL(value);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.origin === value.replace(/\/$/, '') && !/[\s;,']/.test(value);
  } catch {
    return false;
  }
};
const isProxyUrl = urlWith('http:', 'https:', 'socks5:');
// ws:// and wss:// for a broker reached only through a web port (a firewall that lets 443 out).
const isMqttUrl = urlWith('mqtt:', 'mqtts:', 'ws:', 'wss:');

const site = z.strictObject({
  id: described(text(z.regex(/^[a-z0-9_-]+$/, 'must match [a-z0-9_-]+')), 'Site identifier, used in every MQTT topic'),
  timezone: described(
    z._default(text(z.refine(isValidTimeZone, 'not an IANA time zone (e.g. Asia/Bangkok)')), 'Asia/Bangkok'),
    'IANA zone of the vendor\'s "YYYY-MM-DD HH:MM:SS" times',
  ),
  currency: described(
    z.optional(text(z.regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code in capitals (e.g. THB)'))),
    "ISO 4217 code of the vendor's Amount (e.g. THB): Home Assistant then shows today's takings as money in it (the vendor's records name no currency)",
  ),
});

const vendor = z.strictObject({
  baseUrl: described(text(z.refine(isHttpUrl, 'must be an http:// or https:// URL')), '{base_url} of the vendor API'),
  apiKey: described(text(z.minLength(1)), 'Vendor Apikey; or env CHAIR_AGENT_VENDOR_API_KEY, or systemd credential vendor-api-key'),
  proxy: described(
    z.optional(text(z.refine(isProxyUrl, 'must be an http://, https:// or socks5:// URL'))),
    "Outbound proxy to the vendor API (http://[user:password@]host:port); without it, the environment's https_proxy/HTTPS_PROXY (http_proxy for an http:// baseUrl) and no_proxy, as curl reads them",
  ),
  ca: described(
    z.optional(text(z.minLength(1))),
    "PEM file of CA certificates trusted for the vendor besides the usual ones (the runtime's and the box's store, /etc/ssl/certs): the CA of a site proxy that inspects TLS, or a vendor's private CA",
  ),
  pollSeconds: described(z._default(z.number().check(z.minimum(0.2)), 5), 'Chair list poll period in seconds; fractions allowed'),
  requestTimeoutSeconds: described(z._default(positive(z.maximum(120)), 10), 'Deadline of one vendor request'),
  retries: described(z._default(int(z.minimum(0), z.maximum(10)), 2), 'Extra attempts of a failed GET (never of a start)'),
  maxRetryAfterSeconds: described(
    z._default(z.number().check(z.minimum(1), z.maximum(3600)), 300),
    "The longest wait a vendor's Retry-After may impose on polling (it is never shorter than pollSeconds)",
  ),
  sessionMinutes: described(z._default(int(z.minimum(1)), 5), 'Time sent on a start when none is given'),
  availableStatuses: described(
    z._default(z.array(text(z.minLength(1))).check(z.minLength(1)), ['Available']),
    'Vendor Status values that mean the chair is idle and may be started',
  ),
  forgetChairAfterMinutes: described(
    z._default(z.number().check(z.minimum(0.05), z.maximum(525_600)), 60),
    "A chair not in the site's config that the vendor's list has left for this long is gone: its Home Assistant entities and retained MQTT topics are cleared (restored if it returns)",
  ),
  location: described(
    z.optional(text(z.trim(), z.minLength(1), z.maxLength(256))),
    "Keep only the chairs and transactions of this Location (the vendor's site name; case and surrounding spaces ignored)",
  ),
});

const transactions = z.strictObject({
  syncSchedule: described(
    z._default(
      text(
        z.superRefine((expr: string, ctx) => {
          const problem = cronProblem(expr);
          if (problem) ctx.addIssue({ code: 'custom', message: problem, input: expr });
        }),
      ),
      '*/30 * * * * *',
    ),
    'node-cron expression (6 fields allowed) for pulling the transaction list',
  ),
  pageSize: z._default(int(z.minimum(1), z.maximum(1000)), 20),
  lookbackHours: described(z._default(positive(), 24), 'How far back the first sync reaches'),
  overlapMinutes: described(
    z._default(z.number().check(z.minimum(0)), 60),
    'Each sync re-reads this much before its cursor, so late records and status changes are not missed',
  ),
  windowHours: described(z._default(positive(), 6), 'Largest from/to window of one request series'),
  timeFormat: described(
    z._default(z.enum(['local', 'iso', 'unix', 'unix-ms']), 'local'),
    'Format of from/to: local = "YYYY-MM-DD HH:MM:SS" in site.timezone',
  ),
});

const webhook = z.strictObject({
  enabled: z._default(z.boolean(), true),
  path: z._default(text(z.regex(/^\/[A-Za-z0-9._~/-]*$/, 'must be a URL path starting with /')), '/vendor/webhook'),
  channelSecret: described(
    z.optional(text(z.minLength(1))),
    'Vendor channel secret; or env CHAIR_AGENT_WEBHOOK_SECRET, or systemd credential webhook-secret',
  ),
  port: described(
    z.optional(int(z.minimum(0), z.maximum(65535))),
    'Serve the webhook alone on this port, apart from http.port (which then has no webhook): the one port to open to the vendor',
  ),
  host: described(z.optional(text(z.minLength(1))), 'Address of the webhook port (webhook.port); default http.host'),
  cert: described(
    z.optional(text(z.minLength(1))),
    'PEM certificate file (with its chain): webhook.port then serves HTTPS; picked up again when the file changes',
  ),
  key: described(z.optional(text(z.minLength(1))), 'PEM private key file of webhook.cert'),
});

const http = z.strictObject({
  host: z._default(text(z.minLength(1)), '0.0.0.0'),
  port: z._default(int(z.minimum(0), z.maximum(65535)), 8080),
  headersTimeoutSeconds: described(z._default(positive(z.maximum(60)), 5), 'A client must send its request headers within this time'),
  requestTimeoutSeconds: described(z._default(positive(z.maximum(300)), 10), '...and its whole request within this one'),
  idleTimeoutSeconds: described(
    z._default(positive(z.maximum(300)), 10),
    'A connection silent this long is closed (also one that never sends a byte)',
  ),
  maxConnections: described(z._default(int(z.minimum(4), z.maximum(10_000)), 64), 'Connections open at once; more are closed as they arrive'),
  trustedProxies: described(
    z._default(z.array(text(z.refine(isAddressOrRange, 'must be an IP address or a CIDR range (192.168.1.5, 10.0.0.0/8)'))), []),
    "The site's reverse proxies in front of the status page (nginx): from them, the client is read from X-Forwarded-For, so viewers and failed tokens are counted per client",
  ),
  embedOrigins: described(
    z._default(z.array(text(z.refine(isWebOrigin, 'must be an origin: http:// or https://, a host and an optional port, no path (https://ha.example.com:8123)'))), []),
    "Sites that may show the status page in a frame (a Home Assistant dashboard's webpage card, a signage player); by default none may",
  ),
  adminToken: described(
    z.optional(text(z.minLength(16, 'must be at least 16 characters'))),
    'Unlocks starting a chair and the LED walk on the status page; or env CHAIR_AGENT_ADMIN_TOKEN, or systemd credential admin-token',
  ),
});

/** An MQTT topic prefix. */
const topicPrefix = (): z.ZodMiniString<string> =>
  text(
    z.regex(/^[^#+\s]+$/, 'must be a topic without wildcards or spaces'),
    z.refine((s: string) => !s.startsWith('/') && !s.endsWith('/'), 'must not start or end with /'),
  );

const homeassistant = z.strictObject({
  enabled: described(z._default(z.boolean(), false), 'Publish Home Assistant MQTT discovery for every chair and the site box'),
  discoveryPrefix: described(z._default(topicPrefix(), 'homeassistant'), "Home Assistant's discovery prefix; its birth message is read at <prefix>/status"),
  supportUrl: described(
    z.optional(text(z.url())),
    "A URL where the site's Home Assistant users find help (the discovery configs' origin.support_url)",
  ),
});

const mqtt = z.strictObject({
  url: z._default(text(z.refine(isMqttUrl, 'must be an mqtt://, mqtts://, ws:// or wss:// URL')), 'mqtt://127.0.0.1:1883'),
  baseTopic: z._default(topicPrefix(), 'chair-agent'),
  username: z.optional(text(z.minLength(1))),
  password: described(z.optional(text(z.minLength(1))), 'Or env CHAIR_AGENT_MQTT_PASSWORD, or systemd credential mqtt-password'),
  clientId: described(z.optional(text(z.minLength(1), z.maxLength(64))), 'Default: chair-agent-<site.id>'),
  ca: described(z.optional(text(z.minLength(1))), 'PEM file of the CA that signed the broker certificate, trusted alone; without it, the usual CAs and the box\'s store (/etc/ssl/certs)'),
  cert: described(z.optional(text(z.minLength(1))), 'PEM client certificate file'),
  key: described(z.optional(text(z.minLength(1))), 'PEM client key file'),
  proxy: described(
    z.optional(text(z.refine(isProxyUrl, 'must be an http://, https:// or socks5:// URL'))),
    "The site's proxy to the broker: http://[user:password@]host:port (or https://), through a CONNECT tunnel, or socks5://[user:password@]host:port; never taken from the environment",
  ),
  rejectUnauthorized: z._default(z.boolean(), true),
  protocolVersion: described(z._default(z.union([z.literal(4), z.literal(5)]), 5), '5 (MQTT 5) or 4 (MQTT 3.1.1)'),
  keepaliveSeconds: z._default(int(z.minimum(5), z.maximum(3600)), 30),
  reconnectSeconds: z._default(positive(z.maximum(300)), 2),
  maxInflight: described(z._default(int(z.minimum(1), z.maximum(1000)), 100), 'Transactions awaiting PUBACK at once'),
  ackTimeoutSeconds: described(
    z._default(positive(z.maximum(600)), 10),
    'A transaction unacknowledged this long while later ones were acknowledged was dropped by the broker: it is parked',
  ),
});

const storage = z.strictObject({
  path: z._default(text(z.minLength(1)), '/var/lib/chair-agent/agent.db'),
  retentionDays: described(z._default(positive(), 30), 'Delivered records older than this are pruned; undelivered never are'),
  maxSizeMb: described(z.optional(positive()), 'Cap on the database size; when reached the agent keeps running, degraded'),
});

const chair = z.strictObject({
  deviceId: text(z.minLength(1)),
  button: z.optional(pin),
  led: z.optional(pin),
  minutes: described(z.optional(int(z.minimum(1))), 'Overrides vendor.sessionMinutes for this chair'),
});

export const DEFAULT_GPIO_DRIVER = 'gpiod';

const gpio = z.strictObject({
  driver: described(
    z._default(z.enum(['gpiod', 'onoff', 'sim']), DEFAULT_GPIO_DRIVER),
    'gpiod (the kernel GPIO character device), onoff (legacy sysfs GPIO) or sim (simulated lines)',
  ),
  bias: described(
    z.optional(z.enum(['pull-up', 'pull-down', 'disabled', 'as-is'])),
    'gpiod only: the buttons\' pull resistor; default pull-up with activeLow, else pull-down',
  ),
  statusLed: described(z.optional(pin), "BCM pin of the agent's own health LED"),
  activeLow: described(z._default(z.boolean(), true), 'Buttons pull the line to ground when pressed'),
  debounceMs: z._default(int(z.minimum(0), z.maximum(1000)), 30),
  chipBase: described(
    z.optional(int(z.minimum(0))),
    'onoff only: sysfs number of BCM 0; found from /sys/class/gpio/gpiochip*/ when absent',
  ),
  chairs: z._default(z.array(chair), []),
});

const start = z.strictObject({
  minMinutes: z._default(int(z.minimum(1)), 1),
  maxMinutes: z._default(int(z.minimum(1)), 60),
  confirmTimeoutSeconds: described(z._default(positive(z.maximum(300)), 20), 'How long to wait for the chair to report running'),
  confirmIntervalSeconds: z._default(positive(z.maximum(30)), 1),
  unknownHoldSeconds: described(
    z._default(z.number().check(z.minimum(0), z.maximum(3600)), 120),
    'After a start whose outcome is unknown, how long further starts of that chair are refused unless the vendor lists it idle or running first',
  ),
});

const log = z.strictObject({
  level: z._default(z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']), 'info'),
});

function cronProblem(expr: string): string | null {
  const check = validateDetailed(expr);
  if (check.valid) return null;
  return `not a valid cron expression (${check.errors.map((e) => `${e.field}: ${e.message}`).join('; ')})`;
}

const asObject = (v: unknown): Record<string, unknown> | undefined =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
const asInt = (v: unknown): number | undefined => (typeof v === 'number' && Number.isInteger(v) ? v : undefined);

const WILDCARD_HOSTS = new Set(['0.0.0.0', '::']);

/**
 * The webhook's own port must not be the other listener's: the second to bind would fail, and the
 * start with it. What only that port serves (its host, its TLS files) needs it.
 */
function webhookPortChecks(webhookSection: Record<string, unknown>, httpSection: Record<string, unknown>, ctx: z.core.$RefinementCtx<unknown>): void {
  const port = asInt(webhookSection['port']);
  if (webhookSection['host'] !== undefined && webhookSection['port'] === undefined) {
    ctx.addIssue({ code: 'custom', path: ['webhook', 'host'], message: 'only with webhook.port (without it the webhook is served on http.host:http.port)' });
  }
  // TLS is served on the webhook's own port, the one open to the vendor: the status page and the
  // metrics on http.port stay plain HTTP for the LAN's browsers and scrapers.
  for (const [k, other] of [['cert', 'key'], ['key', 'cert']] as const) {
    if (webhookSection[k] === undefined) continue;
    if (webhookSection['port'] === undefined) {
      ctx.addIssue({ code: 'custom', path: ['webhook', k], message: 'only with webhook.port (HTTPS is served on the webhook\'s own port; http.port stays plain HTTP)' });
    }
    if (webhookSection[other] === undefined) ctx.addIssue({ code: 'custom', path: ['webhook', other], message: `required when webhook.${k} is set` });
  }
  if (port === undefined || port === 0) return;
  const httpPort = asInt(httpSection['port']) ?? 8080;
  const httpHost = typeof httpSection['host'] === 'string' ? httpSection['host'] : '0.0.0.0';
  const host = typeof webhookSection['host'] === 'string' ? webhookSection['host'] : httpHost;
  if (port === httpPort && (host === httpHost || WILDCARD_HOSTS.has(host) || WILDCARD_HOSTS.has(httpHost))) {
    ctx.addIssue({ code: 'custom', path: ['webhook', 'port'], message: `must differ from http.port (${httpPort}) on the same address`, input: port });
  }
}

/**
 * Rules that span several keys. They run even when other keys are wrong (`when`), so one run
 * reports every problem; hence they read the document defensively.
 */
function crossChecks(doc: unknown, ctx: z.core.$RefinementCtx<unknown>): void {
  const c = asObject(doc) ?? {};
  const webhookSection = asObject(c['webhook']) ?? {};
  if (webhookSection['enabled'] !== false && webhookSection['channelSecret'] === undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['webhook', 'channelSecret'],
      message: 'required while the webhook is enabled (inline, env CHAIR_AGENT_WEBHOOK_SECRET or credential webhook-secret)',
    });
  }
  webhookPortChecks(webhookSection, asObject(c['http']) ?? {}, ctx);
  const startSection = asObject(c['start']) ?? {};
  const min = asInt(startSection['minMinutes']) ?? 1;
  const max = asInt(startSection['maxMinutes']) ?? 60;
  if (min > max) ctx.addIssue({ code: 'custom', path: ['start', 'minMinutes'], message: `must not exceed start.maxMinutes (${max})` });
  const outOfRange = (m: unknown, path: (string | number)[]): void => {
    const v = asInt(m);
    if (v !== undefined && (v < min || v > max)) {
      ctx.addIssue({ code: 'custom', path, message: `must be within start.minMinutes..start.maxMinutes (${min}..${max})`, input: v });
    }
  };
  outOfRange(asObject(c['vendor'])?.['sessionMinutes'], ['vendor', 'sessionMinutes']);

  const gpioSection = asObject(c['gpio']) ?? {};
  const pins = new Map<number, string>();
  const claim = (p: unknown, where: (string | number)[]): void => {
    const n = asInt(p);
    if (n === undefined) return;
    const first = pins.get(n);
    if (first) ctx.addIssue({ code: 'custom', path: where, message: `pin ${n} is already used by ${first}`, input: n });
    else pins.set(n, formatPath(where));
  };
  claim(gpioSection['statusLed'], ['gpio', 'statusLed']);
  const chairs = Array.isArray(gpioSection['chairs']) ? (gpioSection['chairs'] as unknown[]) : [];
  const ids = new Map<string, number>();
  chairs.forEach((entry, i) => {
    const ch = asObject(entry);
    if (!ch) return;
    claim(ch['button'], ['gpio', 'chairs', i, 'button']);
    claim(ch['led'], ['gpio', 'chairs', i, 'led']);
    outOfRange(ch['minutes'], ['gpio', 'chairs', i, 'minutes']);
    const id = ch['deviceId'];
    if (typeof id !== 'string') return;
    const seen = ids.get(id);
    if (seen !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['gpio', 'chairs', i, 'deviceId'], message: `${id} is already listed at gpio.chairs[${seen}]` });
    } else ids.set(id, i);
  });
}

export const ConfigSchema = z
  .strictObject({
    site,
    vendor,
    transactions: z.prefault(transactions, {}),
    webhook: z.prefault(webhook, {}),
    http: z.prefault(http, {}),
    mqtt: z.prefault(mqtt, {}),
    storage: z.prefault(storage, {}),
    gpio: z.prefault(gpio, {}),
    start: z.prefault(start, {}),
    log: z.prefault(log, {}),
    homeassistant: z.prefault(homeassistant, {}),
  })
  .check(z.superRefine(crossChecks, { when: () => true }));

export type ConfigInput = z.input<typeof ConfigSchema>;
type DeepReadonly<T> = T extends (infer U)[]
  ? readonly DeepReadonly<U>[]
  : T extends object
    ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
    : T;
export type Config = DeepReadonly<z.output<typeof ConfigSchema>>;

/** Paths of the values that are secrets: never logged, masked by `check`. */
export const SECRET_PATHS = [
  ['vendor', 'apiKey'],
  ['webhook', 'channelSecret'],
  ['mqtt', 'password'],
  ['http', 'adminToken'],
] as const;

/** "gpio.chairs[0].led" */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out === '' ? String(part) : `.${String(part)}`;
  }
  return out === '' ? '(root)' : out;
}

export function configJsonSchema(): unknown {
  return z.toJSONSchema(ConfigSchema, { io: 'input', unrepresentable: 'any' });
}
