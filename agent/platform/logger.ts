import { pino, type Logger, type DestinationStream, type LevelWithSilent } from 'pino';

export type { Logger };

/**
 * Keys whose value may be a secret, wherever they appear (top level or nested a few levels,
 * e.g. headers.authorization, vendor.apiKey, req.headers["x-vendor-signature"]).
 */
const SECRET_KEYS = new Set(['apiKey', 'apikey', 'channelSecret', 'password', 'secret', 'signature', 'x-vendor-signature', 'authorization', 'adminToken', 'token']);
const REDACT_DEPTH = 3;
export const REDACTED = '[redacted]';

/**
 * The log object with every value under a secret key replaced, copied only where one is found:
 * most lines hold none, and pino's own path redaction parses every path again on every line
 * (a tenth of the CPU of a webhook at full rate).
 */
export function redactSecrets<T>(value: T, depth = 0): T {
  if (value === null || typeof value !== 'object' || depth >= REDACT_DEPTH || value instanceof Error) return value;
  let out: Record<string, unknown> | unknown[] | null = null;
  const src = value as Record<string, unknown>;
  for (const key of Array.isArray(value) ? value.keys() : Object.keys(src)) {
    const v = src[key as keyof typeof src];
    const r = typeof key === 'string' && SECRET_KEYS.has(key) && v !== undefined ? REDACTED : redactSecrets(v, depth + 1);
    if (r !== v) {
      out ??= Array.isArray(value) ? [...value] : { ...src };
      (out as Record<string, unknown>)[key as string] = r;
    }
  }
  return (out ?? value) as T;
}

export interface LoggerOptions {
  level: LevelWithSilent;
  /**
   * Where JSON lines go. When absent, stdout through sonic-boom's thread-pool writes (the CLI's
   * short-lived commands); `run` passes a StreamLogSink (log-sink.ts), which bounds what a stalled
   * reader leaves queued and survives a stdout that fails.
   */
  destination?: DestinationStream;
  /** Extra fields on every line. */
  base?: Record<string, unknown>;
  /**
   * Secret values known at start (API key, webhook secret, broker password). Any line that still
   * contains one, e.g. inside a library's error message, has it replaced before it is written.
   */
  secrets?: readonly string[];
}

/** Every logger of a family (the root and its children, weakly held), so a level change reaches them all. */
const families = new WeakMap<Logger, Set<WeakRef<Logger>>>();

export function createLogger(options: LoggerOptions): Logger {
  const members = new Set<WeakRef<Logger>>();
  const root = pino(
    {
      level: options.level,
      onChild: (child) => void members.add(new WeakRef(child)),
      base: options.base ?? {},
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }), log: redactSecrets },
      // A child's bindings skip formatters.log: their secret keys are censored as they are bound.
      serializers: Object.fromEntries([...SECRET_KEYS].map((k) => [k, () => REDACTED])),
    },
    scrubbing(options.destination ?? pino.destination({ fd: 1, sync: false }), options.secrets ?? []),
  );
  families.set(root, members);
  return root;
}

/**
 * Sets the level of a logger made by createLogger and of every child made from it since (pino
 * copies the level into a child when it is made). Until the next restart: log.level in the
 * config is what a start uses.
 */
export function setLogLevel(root: Logger, level: LevelWithSilent): void {
  root.level = level;
  for (const ref of families.get(root) ?? []) {
    const child = ref.deref();
    if (child) child.level = level;
    else families.get(root)?.delete(ref);
  }
}

function scrubbing(dest: DestinationStream, secrets: readonly string[]): DestinationStream {
  const needles = [...new Set(secrets.filter((s) => s.length >= 4))];
  if (needles.length === 0) return dest;
  return {
    write(line: string) {
      let out = line;
      for (const needle of needles) {
        if (out.includes(needle)) out = out.split(needle).join(REDACTED);
      }
      dest.write(out);
    },
  };
}

/** A logger that drops everything, for commands and tests that do not want output. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
