import type { Writable } from 'node:stream';

/** What a command gets from main.ts instead of touching process globals. */
export interface CommandContext {
  env: Readonly<Record<string, string | undefined>>;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Aborted on SIGTERM/SIGINT. */
  signal: AbortSignal;
  /** Standard input when it is a terminal (the demo's keys), else undefined. */
  stdin?: NodeJS.ReadStream | undefined;
  /** Standard input, terminal or not (a secret piped in). */
  input: NodeJS.ReadStream;
  inputIsTTY: boolean;
  stdoutIsTTY: boolean;
  /** Standard output as a stream for `run`'s log lines, made on first call (platform/log-sink.ts). */
  logOutput?: (() => Writable) | undefined;
  /** Standard output is journald's stream (platform/journal-priority.ts): `run`'s lines carry their priority. */
  stdoutIsJournal?: boolean;
  pid: number;
  /**
   * Where Node.js's process warnings go (an experimental API a dependency uses, a listener leak):
   * `run` hands a handler that logs them, so the journal gets a JSON line; null, or a command that
   * sets none, prints them as Node.js does.
   */
  onWarning?: ((handler: ((warning: Error) => void) | null) => void) | undefined;
}

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
/** sysexits EX_CONFIG: systemd is told not to restart on it (RestartPreventExitStatus=78). */
export const EXIT_CONFIG = 78;
