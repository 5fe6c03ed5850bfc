import { z } from 'zod';
import cron from 'node-cron';
import { isValidTimeZone } from '../time/vendor-time.js';

/**
 * The configuration file, as one schema. The TypeScript type, the defaults, the validation and
 * config/schema.json all come from here.
 */

const BCM_PIN_MAX = 27;
const pin = z.number().int().min(0).max(BCM_PIN_MAX).describe('BCM pin number as printed on the Pi pinout');
const positive = z.number().positive();

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
const isMqttUrl = urlWith('mqtt:', 'mqtts:');

const site = z.strictObject({
  id: z.string().regex(/^[a-z0-9_-]+$/, 'must match [a-z0-9_-]+').describe('Site identifier, used in every MQTT topic'),
  timezone: z
    .string()
    .refine(isValidTimeZone, 'not an IANA time zone (e.g. Asia/Bangkok)')
    .default('Asia/Bangkok')
    .describe('IANA zone of the vendor\'s "YYYY-MM-DD HH:MM:SS" times'),
});

const vendor = z.strictObject({
  baseUrl: z.string().refine(isHttpUrl, 'must be an http:// or https:// URL').describe('{base_url} of the vendor API'),
  apiKey: z
    .string()
    .min(1)
    .describe('Vendor Apikey; or env CHAIR_AGENT_VENDOR_API_KEY, or systemd credential vendor-api-key'),
  pollSeconds: z.number().min(0.2).default(5).describe('Chair list poll period in seconds; fractions allowed'),
  requestTimeoutSeconds: positive.max(120).default(10).describe('Deadline of one vendor request'),
  retries: z.number().int().min(0).max(10).default(2).describe('Extra attempts of a failed GET (never of a start)'),
  maxRetryAfterSeconds: z
    .number()
    .min(1)
    .max(3600)
    .default(300)
    .describe("The longest wait a vendor's Retry-After may impose on polling (it is never shorter than pollSeconds)"),
  sessionMinutes: z.number().int().min(1).default(5).describe('Time sent on a start when none is given'),
  availableStatuses: z
    .array(z.string().min(1))
    .min(1)
    .default(['Available'])
    .describe('Vendor Status values that mean the chair is idle and may be started'),
  forgetChairAfterMinutes: z
    .number()
    .min(0.05)
    .max(525_600)
    .default(60)
    .describe(
      "A chair not in the site's config that the vendor's list has left for this long is gone: its Home Assistant entities and retained MQTT topics are cleared (restored if it returns)",
    ),
  location: z
    .string()
    .trim()
    .min(1)
    .max(256)
    .optional()
    .describe("Keep only the chairs and transactions of this Location (the vendor's site name; case and surrounding spaces ignored)"),
});

const transactions = z.strictObject({
  syncSchedule: z
    .string()
    .superRefine((expr, ctx) => {
      const problem = cronProblem(expr);
      if (problem) ctx.addIssue({ code: 'custom', message: problem, input: expr });
    })
    .default('*/30 * * * * *')
    .describe('node-cron expression (6 fields allowed) for pulling the transaction list'),
  pageSize: z.number().int().min(1).max(1000).default(20),
  lookbackHours: positive.default(24).describe('How far back the first sync reaches'),
  overlapMinutes: z
    .number()
    .min(0)
    .default(60)
    .describe('Each sync re-reads this much before its cursor, so late records and status changes are not missed'),
  windowHours: positive.default(6).describe('Largest from/to window of one request series'),
  timeFormat: z
    .enum(['local', 'iso', 'unix', 'unix-ms'])
    .default('local')
    .describe('Format of from/to: local = "YYYY-MM-DD HH:MM:SS" in site.timezone'),
});

const webhook = z.strictObject({
  enabled: z.boolean().default(true),
  path: z.string().regex(/^\/[A-Za-z0-9._~/-]*$/, 'must be a URL path starting with /').default('/vendor/webhook'),
  channelSecret: z
    .string()
    .min(1)
    .optional()
    .describe('Vendor channel secret; or env CHAIR_AGENT_WEBHOOK_SECRET, or systemd credential webhook-secret'),
});

const http = z.strictObject({
  host: z.string().min(1).default('0.0.0.0'),
  port: z.number().int().min(0).max(65535).default(8080),
  headersTimeoutSeconds: positive.max(60).default(5).describe('A client must send its request headers within this time'),
  requestTimeoutSeconds: positive.max(300).default(10).describe('...and its whole request within this one'),
  idleTimeoutSeconds: positive.max(300).default(10).describe('A connection silent this long is closed (also one that never sends a byte)'),
  maxConnections: z.number().int().min(4).max(10_000).default(64).describe('Connections open at once; more are closed as they arrive'),
  adminToken: z
    .string()
    .min(16, 'must be at least 16 characters')
    .optional()
    .describe('Unlocks starting a chair and the LED walk on the status page; or env CHAIR_AGENT_ADMIN_TOKEN, or systemd credential admin-token'),
});

const homeassistant = z.strictObject({
  enabled: z.boolean().default(false).describe('Publish Home Assistant MQTT discovery for every chair and the site box'),
  discoveryPrefix: z
    .string()
    .regex(/^[^#+\s]+$/, 'must be a topic without wildcards or spaces')
    .refine((s) => !s.startsWith('/') && !s.endsWith('/'), 'must not start or end with /')
    .default('homeassistant')
    .describe("Home Assistant's discovery prefix; its birth message is read at <prefix>/status"),
  supportUrl: z
    .string()
    .url()
    .optional()
    .describe("A URL where the site's Home Assistant users find help (the discovery configs' origin.support_url)"),
});

const mqtt = z.strictObject({
  url: z.string().refine(isMqttUrl, 'must be an mqtt:// or mqtts:// URL').default('mqtt://127.0.0.1:1883'),
  baseTopic: z
    .string()
    .regex(/^[^#+\s]+$/, 'must be a topic without wildcards or spaces')
    .refine((s) => !s.startsWith('/') && !s.endsWith('/'), 'must not start or end with /')
    .default('chair-agent'),
  username: z.string().min(1).optional(),
  password: z.string().min(1).optional().describe('Or env CHAIR_AGENT_MQTT_PASSWORD, or systemd credential mqtt-password'),
  clientId: z.string().min(1).max(64).optional().describe('Default: chair-agent-<site.id>'),
  ca: z.string().min(1).optional().describe('PEM file of the CA that signed the broker certificate'),
  cert: z.string().min(1).optional().describe('PEM client certificate file'),
  key: z.string().min(1).optional().describe('PEM client key file'),
  rejectUnauthorized: z.boolean().default(true),
  protocolVersion: z.union([z.literal(4), z.literal(5)]).default(5).describe('5 (MQTT 5) or 4 (MQTT 3.1.1)'),
  keepaliveSeconds: z.number().int().min(5).max(3600).default(30),
  reconnectSeconds: positive.max(300).default(2),
  maxInflight: z.number().int().min(1).max(1000).default(100).describe('Transactions awaiting PUBACK at once'),
  ackTimeoutSeconds: positive
    .max(600)
    .default(10)
    .describe('A transaction unacknowledged this long while later ones were acknowledged was dropped by the broker: it is parked'),
});

const storage = z.strictObject({
  path: z.string().min(1).default('/var/lib/chair-agent/agent.db'),
  retentionDays: positive.default(30).describe('Delivered records older than this are pruned; undelivered never are'),
  maxSizeMb: positive.optional().describe('Cap on the database size; when reached the agent keeps running, degraded'),
});

const chair = z.strictObject({
  deviceId: z.string().min(1),
  button: pin.optional(),
  led: pin.optional(),
  minutes: z.number().int().min(1).optional().describe('Overrides vendor.sessionMinutes for this chair'),
});

export const DEFAULT_GPIO_DRIVER = 'gpiod';

const gpio = z.strictObject({
  driver: z
    .enum(['gpiod', 'onoff', 'sim'])
    .default(DEFAULT_GPIO_DRIVER)
    .describe('gpiod (the kernel GPIO character device), onoff (legacy sysfs GPIO) or sim (simulated lines)'),
  bias: z
    .enum(['pull-up', 'pull-down', 'disabled', 'as-is'])
    .optional()
    .describe('gpiod only: the buttons\' pull resistor; default pull-up with activeLow, else pull-down'),
  statusLed: pin.optional().describe("BCM pin of the agent's own health LED"),
  activeLow: z.boolean().default(true).describe('Buttons pull the line to ground when pressed'),
  debounceMs: z.number().int().min(0).max(1000).default(30),
  chipBase: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe('onoff only: sysfs number of BCM 0; found from /sys/class/gpio/gpiochip*/ when absent'),
  chairs: z.array(chair).default([]),
});

const start = z.strictObject({
  minMinutes: z.number().int().min(1).default(1),
  maxMinutes: z.number().int().min(1).default(60),
  confirmTimeoutSeconds: positive.max(300).default(20).describe('How long to wait for the chair to report running'),
  confirmIntervalSeconds: positive.max(30).default(1),
  unknownHoldSeconds: z
    .number()
    .min(0)
    .max(3600)
    .default(120)
    .describe('After a start whose outcome is unknown, how long further starts of that chair are refused unless the vendor lists it idle or running first'),
});

const log = z.strictObject({
  level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

function cronProblem(expr: string): string | null {
  const check = cron.validateDetailed(expr);
  if (check.valid) return null;
  return `not a valid cron expression (${check.errors.map((e) => `${e.field}: ${e.message}`).join('; ')})`;
}

const asObject = (v: unknown): Record<string, unknown> | undefined =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
const asInt = (v: unknown): number | undefined => (typeof v === 'number' && Number.isInteger(v) ? v : undefined);

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
    transactions: transactions.prefault({}),
    webhook: webhook.prefault({}),
    http: http.prefault({}),
    mqtt: mqtt.prefault({}),
    storage: storage.prefault({}),
    gpio: gpio.prefault({}),
    start: start.prefault({}),
    log: log.prefault({}),
    homeassistant: homeassistant.prefault({}),
  })
  .superRefine(crossChecks, { when: () => true });

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
