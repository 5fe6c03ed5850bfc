import { pino, type Logger, type DestinationStream, type LevelWithSilent } from 'pino';

export type { Logger };

/**
 * Paths that may hold a secret anywhere in a log object. pino's redaction replaces the value
 * before serialisation, so a secret never reaches stdout (and so never reaches journald).
 */
const REDACT_PATHS = [
  'apiKey',
  'channelSecret',
  'password',
  'secret',
  'signature',
  '*.apiKey',
  '*.channelSecret',
  '*.password',
  '*.secret',
  '*.signature',
  '*.*.apiKey',
  '*.*.channelSecret',
  '*.*.password',
  'headers.apikey',
  'headers["x-vendor-signature"]',
  'req.headers.apikey',
  'req.headers["x-vendor-signature"]',
  'req.headers.authorization',
];

export interface LoggerOptions {
  level: LevelWithSilent;
  /** Where JSON lines go; stdout when absent. */
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
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
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
        if (out.includes(needle)) out = out.split(needle).join('[redacted]');
      }
      dest.write(out);
    },
  };
}

/** A logger that drops everything, for commands and tests that do not want output. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
