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

export function createLogger(options: LoggerOptions): Logger {
  return pino(
    {
      level: options.level,
      base: options.base ?? {},
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    scrubbing(options.destination ?? pino.destination({ fd: 1, sync: false }), options.secrets ?? []),
  );
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
