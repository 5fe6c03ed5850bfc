import { parseArgs } from 'node:util';
import { AgentError } from '../platform/errors.js';

export const VERBS = ['run', 'check', 'doctor', 'start', 'outbox', 'gpio', 'secrets', 'simulate', 'demo', 'schema'] as const;
export type Verb = (typeof VERBS)[number];

export interface ParsedArgs {
  verb: Verb | 'help' | 'version';
  config?: string | undefined;
  help: boolean;
  positionals: string[];
  values: Record<string, string | boolean | undefined>;
}

const COMMON = {
  config: { type: 'string', short: 'c' },
  help: { type: 'boolean', short: 'h' },
} as const;

const PER_VERB = {
  run: { pretty: { type: 'boolean' } },
  check: {},
  doctor: {},
  start: { minutes: { type: 'string', short: 'm' }, json: { type: 'boolean' } },
  outbox: { json: { type: 'boolean' }, parked: { type: 'boolean' }, 'retry-parked': { type: 'boolean' } },
  secrets: {},
  gpio: { blink: { type: 'boolean' } },
  simulate: {
    port: { type: 'string', short: 'p' },
    host: { type: 'string' },
    chairs: { type: 'string' },
    'api-key': { type: 'string' },
    'webhook-url': { type: 'string' },
    'webhook-secret': { type: 'string' },
    'minute-seconds': { type: 'string' },
    locations: { type: 'string' },
    timezone: { type: 'string' },
  },
  demo: { chairs: { type: 'string' }, 'minute-seconds': { type: 'string' } },
  schema: {},
} as const;

export class UsageError extends AgentError {
  constructor(message: string) {
    super('USAGE', message);
  }
}

export function parseCli(argv: readonly string[]): ParsedArgs {
  const [first, ...rest] = argv;
  if (first === undefined || first === '--help' || first === '-h' || first === 'help') {
    return { verb: 'help', help: true, positionals: [], values: {} };
  }
  if (first === '--version' || first === '-v' || first === 'version') return { verb: 'version', help: false, positionals: [], values: {} };
  if (!(VERBS as readonly string[]).includes(first)) throw new UsageError(`unknown command "${first}"`);
  const verb = first as Verb;
  let parsed;
  try {
    parsed = parseArgs({ args: [...rest], options: { ...COMMON, ...PER_VERB[verb] }, allowPositionals: verb === 'start' || verb === 'secrets', strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message.replace(/\. To specify a positional.*$/s, ''));
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  return { verb, config: values['config'] as string | undefined, help: values['help'] === true, positionals: parsed.positionals, values };
}

/** A whole number option, or a usage error naming it. */
export function intOption(values: ParsedArgs['values'], name: string, min: number, max: number): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  const n = typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(n) || n < min || n > max) throw new UsageError(`--${name} must be a whole number from ${min} to ${max}`);
  return n;
}

export function numberOption(values: ParsedArgs['values'], name: string, min: number): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  const n = typeof raw === 'string' ? Number(raw) : NaN;
  if (!Number.isFinite(n) || n < min) throw new UsageError(`--${name} must be a number >= ${min}`);
  return n;
}
