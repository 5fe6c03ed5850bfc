import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseDocument } from 'yaml';
import type * as z from 'zod/mini';
import { errorCode, errorMessage } from '../platform/errors.js';
import { brokerTlsProblems, readCaBundle, readTlsPair } from '../platform/tls-files.js';
import { deepFreeze } from '../core/deep-freeze.js';
import { ConfigError } from './config-error.js';
import { ConfigSchema, SECRET_PATHS, formatPath, type Config } from './schema.js';
import { redactUrlsIn } from './redact.js';
import { proxyFromEnvironment } from './proxy-env.js';

export { ConfigError, DEFAULT_CONFIG_PATH, type ConfigErrorCode } from './config-error.js';

export type SecretSource = 'inline' | 'environment' | 'credential';

export interface SecretSpec {
  path: readonly [string, string];
  env: string;
  credential: string;
}

export const SECRETS: readonly SecretSpec[] = [
  { path: SECRET_PATHS[0], env: 'CHAIR_AGENT_VENDOR_API_KEY', credential: 'vendor-api-key' },
  { path: SECRET_PATHS[1], env: 'CHAIR_AGENT_WEBHOOK_SECRET', credential: 'webhook-secret' },
  { path: SECRET_PATHS[2], env: 'CHAIR_AGENT_MQTT_PASSWORD', credential: 'mqtt-password' },
  { path: SECRET_PATHS[3], env: 'CHAIR_AGENT_ADMIN_TOKEN', credential: 'admin-token' },
];

export interface ConfigSources {
  /** Environment variables: the CHAIR_AGENT_* secrets, and the proxy variables (proxy-env.ts). */
  env: Readonly<Record<string, string | undefined>>;
  /**
   * Where the secrets stored as systemd credentials are: systemd's $CREDENTIALS_DIRECTORY for the
   * service, else the directory they are stored in (/etc/chair-agent/credentials beside the
   * default config), so a command run by hand gets the same secrets as the service.
   */
  credentialsDirectory?: string | undefined;
}

export interface LoadedConfig {
  config: Config;
  path: string;
  /** Where each secret that is set came from, keyed by its dotted path. */
  secretSources: Readonly<Record<string, SecretSource>>;
  /** The environment variable vendor.proxy came from, when the config file names none. */
  proxyVariable?: string;
}

/** Reads, resolves secrets, validates and freezes. Throws ConfigError with every problem found. */
export function loadConfig(path: string, sources: ConfigSources): LoadedConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = errorCode(err);
    if (code === 'EACCES' || code === 'EPERM') throw new ConfigError('CONFIG_PERMISSION', [`cannot read ${path} (permission denied)`]);
    throw new ConfigError('CONFIG_UNREADABLE', [`${path}: cannot read the configuration file (${code ?? 'error'})`]);
  }
  return parseConfig(text, path, sources);
}

export function parseConfig(text: string, path: string, sources: ConfigSources): LoadedConfig {
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      'CONFIG_SYNTAX',
      doc.errors.map((e) => {
        const at = e.linePos?.[0];
        return `${path}${at ? `:${at.line}:${at.col}` : ''}: YAML syntax error: ${(e.message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?$/, '')}`;
      }),
    );
  }
  const raw: unknown = doc.toJS() ?? {};
  return validateConfig(raw, path, sources);
}

export function validateConfig(raw: unknown, path: string, sources: ConfigSources): LoadedConfig {
  const secretSources = resolveSecrets(raw, sources);
  const proxyVariable = resolveProxy(raw, sources.env);
  const result = ConfigSchema.safeParse(raw, { reportInput: true });
  if (!result.success) throw new ConfigError('CONFIG_INVALID', describeIssues(result.error.issues));
  const config = result.data;
  if ((config.mqtt.cert === undefined) !== (config.mqtt.key === undefined)) {
    throw new ConfigError('CONFIG_INVALID', [`mqtt.${config.mqtt.cert === undefined ? 'cert' : 'key'}: required when mqtt.${config.mqtt.cert === undefined ? 'key' : 'cert'} is set`]);
  }
  return { config: deepFreeze(config), path, secretSources, ...(proxyVariable ? { proxyVariable } : {}) };
}

/**
 * A site's proxy is often set for the whole box (systemd's DefaultEnvironment=, a drop-in's
 * Environment=), as for apt and curl: without vendor.proxy in the file, the environment's is put
 * into the document before validation, so a bad one is reported as vendor.proxy. The variable's name.
 */
function resolveProxy(raw: unknown, env: ConfigSources['env']): string | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const vendorSection = (raw as Record<string, unknown>)['vendor'];
  if (!vendorSection || typeof vendorSection !== 'object' || Array.isArray(vendorSection)) return undefined;
  const v = vendorSection as Record<string, unknown>;
  if (v['proxy'] !== undefined || typeof v['baseUrl'] !== 'string') return undefined;
  const found = proxyFromEnvironment(v['baseUrl'], env);
  if (!found) return undefined;
  v['proxy'] = found.url;
  return found.variable;
}

/**
 * Puts the winning value of each secret into the raw document before validation:
 * a systemd credential beats the environment, which beats the file.
 */
function resolveSecrets(raw: unknown, sources: ConfigSources): Record<string, SecretSource> {
  const found: Record<string, SecretSource> = {};
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return found;
  const doc = raw as Record<string, unknown>;
  for (const spec of SECRETS) {
    const [section, key] = spec.path;
    const dotted = `${section}.${key}`;
    const fromCredential = readCredential(sources.credentialsDirectory, spec.credential);
    const fromEnv = sources.env[spec.env] || undefined;
    const value = fromCredential ?? fromEnv;
    const holder = doc[section];
    if (value !== undefined) {
      if (holder === undefined || holder === null) doc[section] = { [key]: value };
      else if (typeof holder === 'object' && !Array.isArray(holder)) (holder as Record<string, unknown>)[key] = value;
      else continue;
      found[dotted] = fromCredential !== undefined ? 'credential' : 'environment';
    } else if (holder && typeof holder === 'object' && (holder as Record<string, unknown>)[key] !== undefined) {
      found[dotted] = 'inline';
    }
  }
  return found;
}

/** A stored secret; undefined when absent or empty (an empty file means "not set"). */
function readCredential(dir: string | undefined, name: string): string | undefined {
  if (!dir) return undefined;
  const file = join(dir, name);
  try {
    const value = readFileSync(file, 'utf8').replace(/\r?\n$/, '');
    return value === '' ? undefined : value;
  } catch (err) {
    const code = errorCode(err);
    if (code === 'EACCES' || code === 'EPERM') throw new ConfigError('CONFIG_PERMISSION', [`cannot read the stored secrets in ${dir} (permission denied)`]);
    return undefined;
  }
}

const SECRET_DOTTED = new Set(SECRETS.map((s) => s.path.join('.')));

function describeValue(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  if (typeof v === 'string') {
    const shown = redactUrlsIn(v);
    return `text ${JSON.stringify(shown.length > 40 ? `${shown.slice(0, 40)}…` : shown)}`;
  }
  return `${typeof v} ${String(v)}`;
}

function describeIssues(issues: readonly z.core.$ZodIssue[]): string[] {
  const out: string[] = [];
  for (const issue of issues) {
    const at = formatPath(issue.path);
    const secret = SECRET_DOTTED.has(issue.path.join('.'));
    const scalar = issue.input === null || typeof issue.input !== 'object';
    const got = secret || !scalar || issue.input === undefined ? '' : ` (got ${describeValue(issue.input)})`;
    switch (issue.code) {
      case 'unrecognized_keys':
        for (const k of issue.keys) out.push(`${formatPath([...issue.path, k])}: unknown key`);
        break;
      case 'invalid_type':
        if (issue.input === undefined) {
          const hint = SECRETS.find((s) => s.path.join('.') === issue.path.join('.'));
          out.push(`${at}: required${hint ? ` (inline, env ${hint.env} or credential ${hint.credential})` : ''}`);
        } else {
          const expected = issue.expected === 'object' ? 'a mapping' : issue.expected === 'array' ? 'a list' : `a ${issue.expected}`;
          out.push(`${at}: expected ${expected}${secret ? '' : `, got ${describeValue(issue.input)}`}`);
        }
        break;
      case 'too_small':
        if (issue.origin === 'string' && Number(issue.minimum) === 1) out.push(`${at}: must not be empty`);
        else if (issue.origin === 'array') out.push(`${at}: must have at least ${issue.minimum} item(s)`);
        else out.push(`${at}: must be ${issue.inclusive ? '>=' : '>'} ${issue.minimum}${got}`);
        break;
      case 'too_big':
        if (issue.origin === 'string') out.push(`${at}: must be at most ${issue.maximum} characters`);
        else out.push(`${at}: must be ${issue.inclusive ? '<=' : '<'} ${issue.maximum}${got}`);
        break;
      case 'invalid_value':
        out.push(`${at}: must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}${got}`);
        break;
      case 'invalid_union':
        out.push(`${at}: not an accepted value${got}`);
        break;
      default:
        out.push(`${at}: ${issue.message}${issue.code === 'custom' || issue.code === 'invalid_format' ? got : ''}`);
    }
  }
  return out;
}

/**
 * What is wrong with the TLS files (the broker's, the webhook port's), as `check` reports it. Not
 * part of a config's validity: a renewal that leaves them broken must not stop the agent at its
 * next start. The broker connection (MqttBroker) and the webhook port (HttpListener) wait for
 * them while the rest runs.
 */
export function tlsFileProblems(config: Config): string[] {
  return [...vendorCaProblems(config), ...brokerTlsProblems(config.mqtt), ...webhookTlsProblems(config)];
}

function vendorCaProblems(config: Config): string[] {
  if (config.vendor.ca === undefined) return [];
  try {
    readCaBundle(config.vendor.ca, 'vendor.ca');
    return [];
  } catch (err) {
    return [errorMessage(err)];
  }
}

function webhookTlsProblems(config: Config): string[] {
  const { enabled, port, cert, key } = config.webhook;
  if (!enabled || port === undefined || cert === undefined || key === undefined) return [];
  try {
    readTlsPair({ cert, key }, { cert: 'webhook.cert', key: 'webhook.key' });
    return [];
  } catch (err) {
    return [errorMessage(err)];
  }
}
