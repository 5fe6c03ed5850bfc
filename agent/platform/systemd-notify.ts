import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Clock, Timer } from './clock.js';
import type { Logger } from './logger.js';
import { errorMessage } from './errors.js';

/** The service manager's side of the agent's lifecycle (sd_notify). */
export interface ServiceNotifier {
  readonly active: boolean;
  ready(status: string): void;
  status(text: string): void;
  stopping(): void;
  /** Pings WATCHDOG=1 from the event loop at half the interval systemd asked for. */
  startWatchdog(): void;
  stopWatchdog(): void;
}

export interface NotifyEnv {
  NOTIFY_SOCKET?: string | undefined;
  WATCHDOG_USEC?: string | undefined;
  WATCHDOG_PID?: string | undefined;
}

const BINARIES = ['/usr/bin/systemd-notify', '/bin/systemd-notify'];

/**
 * Node cannot send on a unix datagram socket, so messages go through the systemd-notify tool.
 * It waits until systemd has taken each message (a barrier), and the unit sets
 * NotifyAccess=all because the sender is a child of the agent.
 */
export function serviceNotifier(env: NotifyEnv, logger: Logger, clock: Clock, pid: number, binary?: string): ServiceNotifier {
  const socket = env.NOTIFY_SOCKET;
  const tool = binary ?? BINARIES.find((b) => existsSync(b));
  if (!socket) return inactive;
  if (!tool) {
    logger.warn({ tried: BINARIES }, 'NOTIFY_SOCKET is set but systemd-notify is missing: install systemd, or use Type=simple in the unit');
    return inactive;
  }
  let warned = false;
  const send = (args: string[]): void => {
    execFile(tool, args, { env: { NOTIFY_SOCKET: socket }, timeout: 5_000 }, (err) => {
      if (err && !warned) {
        warned = true;
        logger.warn({ err: errorMessage(err), args }, 'systemd-notify failed');
      }
    });
  };
  const usec = Number(env.WATCHDOG_USEC);
  const watchdogFor = env.WATCHDOG_PID === undefined || Number(env.WATCHDOG_PID) === pid;
  let timer: Timer | null = null;
  return {
    active: true,
    ready: (status) => send(['--ready', `--status=${status}`]),
    status: (text) => send([`--status=${text}`]),
    stopping: () => send(['STOPPING=1', '--status=stopping']),
    startWatchdog() {
      if (timer || !watchdogFor || !Number.isFinite(usec) || usec <= 0) return;
      const every = Math.max(100, Math.floor(usec / 2000));
      send(['WATCHDOG=1']);
      timer = clock.setInterval(() => send(['WATCHDOG=1']), every);
      logger.debug({ everyMs: every }, 'watchdog pings started');
    },
    stopWatchdog() {
      timer?.cancel();
      timer = null;
    },
  };
}

const inactive: ServiceNotifier = {
  active: false,
  ready: () => undefined,
  status: () => undefined,
  stopping: () => undefined,
  startWatchdog: () => undefined,
  stopWatchdog: () => undefined,
};
