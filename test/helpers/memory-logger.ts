import { createLogger, type Logger } from '../../agent/platform/logger.js';

export interface LogRecord {
  level: string;
  msg: string;
  component?: string;
  [k: string]: unknown;
}

/** The real logger (redaction included), writing into memory for assertions. */
export function memoryLogger(level: 'debug' | 'info' | 'warn' = 'info', secrets: string[] = []): { logger: Logger; lines: LogRecord[]; raw: string[] } {
  const lines: LogRecord[] = [];
  const raw: string[] = [];
  const logger = createLogger({
    level,
    secrets,
    destination: {
      write(line: string) {
        raw.push(line);
        lines.push(JSON.parse(line) as LogRecord);
      },
    },
  });
  return { logger, lines, raw };
}
