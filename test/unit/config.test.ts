import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../agent/config/load.js';
import { maskedConfigYaml } from '../../agent/config/mask.js';
import { configJsonSchema } from '../../agent/config/schema.js';
import { ROOT } from '../helpers/cli.js';

const BASE = `site: {id: ladprao-01}
vendor: {baseUrl: "https://api.vendor.example", apiKey: inline-key-123}
webhook: {channelSecret: inline-secret-456}
`;

/** BASE with `extra` appended; a section given in `extra` replaces the one in BASE. */
function withSections(extra: string): string {
  const replaced = new Set([...extra.matchAll(/^([a-z]+):/gm)].map((m) => m[1]));
  const kept = BASE.split('\n').filter((line) => !replaced.has(line.split(':')[0]));
  return `${kept.join('\n')}\n${extra}\n`;
}

function problems(yaml: string, env: Record<string, string> = {}): string[] {
  try {
    parseConfig(yaml, 'c.yaml', { env });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return [...(err as ConfigError).problems];
  }
  return [];
}

describe('configuration', () => {
  it('fills every default from a minimal file', () => {
    const { config } = parseConfig(BASE, 'c.yaml', { env: {} });
    expect(config.site.timezone).toBe('Asia/Bangkok');
    expect(config.vendor.pollSeconds).toBe(5);
    expect(config.mqtt).toMatchObject({ url: 'mqtt://127.0.0.1:1883', baseTopic: 'chair-agent', protocolVersion: 5 });
    expect(config.transactions.syncSchedule).toBe('*/30 * * * * *');
    expect(config.gpio).toMatchObject({ driver: 'gpiod', chairs: [] });
    expect(Object.isFrozen(config.vendor)).toBe(true);
  });

  it.each([
    ['an unknown key', 'vendor: {baseUrl: "https://x", apiKey: k, pollSecs: 5}', 'vendor.pollSecs: unknown key'],
    ['an unknown section', 'extra: {a: 1}', 'extra: unknown key'],
    ['a wrong type', 'http: {port: "8080"}', 'http.port: expected a number, got text "8080"'],
    ['a poll period too short', 'vendor: {baseUrl: "https://x", apiKey: k, pollSeconds: 0.1}', 'vendor.pollSeconds: must be >= 0.2 (got number 0.1)'],
    ['a bad site id', 'site: {id: "Lad Prao"}', 'site.id: must match [a-z0-9_-]+ (got text "Lad Prao")'],
    ['a bad vendor URL', 'vendor: {baseUrl: "ftp://x", apiKey: k}', 'vendor.baseUrl: must be an http:// or https:// URL (got text "ftp://x")'],
    ['a bad broker URL', 'mqtt: {url: "http://broker"}', 'mqtt.url: must be an mqtt://, mqtts://, ws:// or wss:// URL (got text "http://broker")'],
    ['a bad broker proxy', 'mqtt: {proxy: "socks4://proxy:1080"}', 'mqtt.proxy: must be an http://, https:// or socks5:// URL (got text "socks4://proxy:1080")'],
    ['trusted proxies that are not addresses', 'http: {trustedProxies: [nginx.lan]}', 'http.trustedProxies[0]: must be an IP address or a CIDR range (192.168.1.5, 10.0.0.0/8) (got text "nginx.lan")'],
    ['an embedding origin with a path', 'http: {embedOrigins: ["http://ha.local:8123/lovelace"]}', 'http.embedOrigins[0]: must be an origin: http:// or https://, a host and an optional port, no path (https://ha.example.com:8123) (got text "http://ha.local:8123/lovelace")'],
    ['a bad time zone', 'site: {id: x, timezone: Mars/Olympus}', 'site.timezone: not an IANA time zone (e.g. Asia/Bangkok) (got text "Mars/Olympus")'],
    ['a currency that is not an ISO 4217 code', 'site: {id: x, currency: baht}', 'site.currency: must be an ISO 4217 code in capitals (e.g. THB) (got text "baht")'],
    ['a bad cron expression', 'transactions: {syncSchedule: "* * 99 * *"}', 'transactions.syncSchedule: not a valid cron expression (dayOfMonth: 99 is a invalid expression for day of month) (got text "* * 99 * *")'],
    ['an unknown driver', 'gpio: {driver: wiringpi}', 'gpio.driver: must be one of "gpiod", "onoff", "sim" (got text "wiringpi")'],
    ['a pin off the header', 'gpio: {chairs: [{deviceId: A, led: 40}]}', 'gpio.chairs[0].led: must be <= 27 (got number 40)'],
    ['a pin used twice', 'gpio: {statusLed: 17, chairs: [{deviceId: A, button: 17}]}', 'gpio.chairs[0].button: pin 17 is already used by gpio.statusLed (got number 17)'],
    ['a chair listed twice', 'gpio: {chairs: [{deviceId: A}, {deviceId: A}]}', 'gpio.chairs[1].deviceId: A is already listed at gpio.chairs[0]'],
    ['minutes out of range', 'start: {maxMinutes: 10}\ngpio: {chairs: [{deviceId: A, minutes: 30}]}', 'gpio.chairs[0].minutes: must be within start.minMinutes..start.maxMinutes (1..10) (got number 30)'],
    ['the webhook on the status page\'s port', 'webhook: {channelSecret: s, port: 8080}', 'webhook.port: must differ from http.port (8080) on the same address (got number 8080)'],
    ['the webhook on the status page\'s port, one host a wildcard', 'http: {host: 127.0.0.1, port: 9000}\nwebhook: {channelSecret: s, host: "::", port: 9000}', 'webhook.port: must differ from http.port (9000) on the same address (got number 9000)'],
    ['a webhook host without its port', 'webhook: {channelSecret: s, host: 192.168.1.5}', 'webhook.host: only with webhook.port (without it the webhook is served on http.host:http.port)'],
    ['a bad log level', 'log: {level: loud}', 'log.level: must be one of "fatal", "error", "warn", "info", "debug", "trace", "silent" (got text "loud")'],
    ['a list where a mapping belongs', 'mqtt: [1, 2]', 'mqtt: expected a mapping, got a list'],
    // a message the schema does not word itself: zod's English one
    ['a support URL that is not one', 'homeassistant: {supportUrl: "help desk"}', 'homeassistant.supportUrl: Invalid URL (got text "help desk")'],
  ])('reports %s as "path: problem"', (_what, extra, expected) => {
    expect(problems(withSections(extra))).toContain(expected);
  });

  it('serves the webhook on a port of its own only when asked, on http.host unless given a host', () => {
    expect(parseConfig(BASE, 'c.yaml', { env: {} }).config.webhook).not.toHaveProperty('port');
    const own = parseConfig(withSections('http: {host: 192.168.1.5, port: 8080}\nwebhook: {channelSecret: s, port: 8443}'), 'c.yaml', { env: {} }).config;
    expect(own.webhook).toMatchObject({ port: 8443 });
    expect(own.webhook.host).toBeUndefined();
    // Two addresses of the box may each have their own listener on one port number.
    expect(problems(withSections('http: {host: 192.168.1.5, port: 8080}\nwebhook: {channelSecret: s, host: 10.8.0.2, port: 8080}'))).toEqual([]);
  });

  it('reports every problem at once', () => {
    const found = problems('site: {id: "A B"}\nvendor: {baseUrl: x}\nhttp: {port: -1}\nlog: {level: x}\n');
    expect(found).toEqual([
      'site.id: must match [a-z0-9_-]+ (got text "A B")',
      'vendor.baseUrl: must be an http:// or https:// URL (got text "x")',
      'vendor.apiKey: required (inline, env CHAIR_AGENT_VENDOR_API_KEY or credential vendor-api-key)',
      'http.port: must be >= 0 (got number -1)',
      'log.level: must be one of "fatal", "error", "warn", "info", "debug", "trace", "silent" (got text "x")',
      'webhook.channelSecret: required while the webhook is enabled (inline, env CHAIR_AGENT_WEBHOOK_SECRET or credential webhook-secret)',
    ]);
  });

  it('names the line of a YAML syntax error', () => {
    expect(problems('site: [1, 2\n')[0]).toMatch(/^c\.yaml:2:1: YAML syntax error: /);
  });

  it('never prints a secret value in a problem', () => {
    const found = problems('site: {id: x}\nvendor: {baseUrl: "https://x", apiKey: 12345678}\nwebhook: {channelSecret: [s3cr3t-value]}\n');
    expect(found).toContain('vendor.apiKey: expected a string');
    expect(found.join('\n')).not.toMatch(/12345678|s3cr3t-value/);
  });

  it('takes a secret from a systemd credential over the environment over the file', () => {
    const creds = mkdtempSync(join(tmpdir(), 'creds-'));
    writeFileSync(join(creds, 'vendor-api-key'), 'from-credential\n');
    const env = { CHAIR_AGENT_VENDOR_API_KEY: 'from-env', CHAIR_AGENT_WEBHOOK_SECRET: 'secret-from-env' };
    const loaded = parseConfig(BASE, 'c.yaml', { env, credentialsDirectory: creds });
    expect(loaded.config.vendor.apiKey).toBe('from-credential');
    expect(loaded.config.webhook.channelSecret).toBe('secret-from-env');
    expect(loaded.secretSources).toEqual({ 'vendor.apiKey': 'credential', 'webhook.channelSecret': 'environment' });
    const noFile = parseConfig('site: {id: x}\nvendor: {baseUrl: "https://x"}\n', 'c.yaml', { env, credentialsDirectory: creds });
    expect(noFile.config.vendor.apiKey).toBe('from-credential');
  });

  it('masks every secret in the printed config, naming where each came from', () => {
    const yaml = `${BASE}mqtt: {url: "mqtt://user:pw-in-url@broker:1883", password: broker-pass-789}\n`;
    const loaded = parseConfig(yaml, 'c.yaml', { env: { CHAIR_AGENT_WEBHOOK_SECRET: 'env-secret-000' } });
    const printed = maskedConfigYaml(loaded.config, loaded.secretSources);
    for (const secret of ['inline-key-123', 'env-secret-000', 'broker-pass-789', 'pw-in-url']) expect(printed).not.toContain(secret);
    expect(printed).toContain('apiKey: "********"');
    expect(printed).toContain('channelSecret: "******** (env CHAIR_AGENT_WEBHOOK_SECRET)"');
    expect(printed).toContain('url: mqtt://user:********@broker:1883');
  });

  it('masks a password inside vendor.baseUrl in check output, and in the error that rejects such a URL', () => {
    const loaded = parseConfig(withSections('vendor: {baseUrl: "https://agent:url-pass-321@api.vendor.example", apiKey: k-1}'), 'c.yaml', { env: {} });
    const printed = maskedConfigYaml(loaded.config, loaded.secretSources);
    expect(printed).not.toContain('url-pass-321');
    expect(printed).toContain('baseUrl: https://agent:********@api.vendor.example/');
    let problems: readonly string[] = [];
    try {
      parseConfig(withSections('vendor: {baseUrl: "ftp://agent:url-pass-654@api.vendor.example", apiKey: k-1}'), 'c.yaml', { env: {} });
    } catch (err) {
      problems = (err as ConfigError).problems;
    }
    expect(problems.join('\n')).toContain('vendor.baseUrl: must be an http:// or https:// URL (got text "ftp://agent:********@api.vendor.example")');
    expect(problems.join('\n')).not.toContain('url-pass-654');
  });

  it('accepts the example config once its secrets are given', () => {
    const text = readFileSync(join(ROOT, 'config', 'config.example.yaml'), 'utf8');
    const { config } = parseConfig(text, 'example', { env: { CHAIR_AGENT_VENDOR_API_KEY: 'k', CHAIR_AGENT_WEBHOOK_SECRET: 's' } });
    expect(config.gpio.chairs.map((c) => c.deviceId)).toEqual(['MC7001', 'MC7002']);
  });

  it('shows every key of the schema in the example config, set or commented', () => {
    const text = readFileSync(join(ROOT, 'config', 'config.example.yaml'), 'utf8');
    const keys: string[] = [];
    const walk = (node: unknown, path: string): void => {
      const n = node as { properties?: Record<string, unknown>; items?: unknown };
      for (const [k, v] of Object.entries(n.properties ?? {})) {
        keys.push(`${path}${k}`);
        walk(v, `${path}${k}.`);
      }
      if (n.items) walk(n.items, `${path}[].`);
    };
    walk(configJsonSchema(), '');
    const missing = keys.filter((k) => !new RegExp(`^[\\s#-]*${k.split('.').pop()}:`, 'm').test(text));
    expect(missing).toEqual([]);
  });

  it('ships a config/schema.json that matches the schema', () => {
    const shipped = JSON.parse(readFileSync(join(ROOT, 'config', 'schema.json'), 'utf8')) as unknown;
    expect(shipped).toEqual(configJsonSchema());
  });
});
