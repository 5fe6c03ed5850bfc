#!/usr/bin/env node
/**
 * The program. The only module that reads argv and the environment, installs signal handlers
 * and calls process.exit; everything else gets what it needs passed in.
 */
import { parseCli, UsageError, type ParsedArgs } from './cli/args.js';
import { USAGE, VERB_HELP } from './cli/help.js';
import { EXIT_FAILURE, EXIT_OK, type CommandContext } from './cli/context.js';
import { errorMessage } from './platform/errors.js';
import { agentVersion } from './platform/version.js';
import { OLD_NODE_HINT, pinnedRuntime } from './cli/pinned-runtime.js';
import { useSystemCaStore } from './platform/system-trust.js';
import * as nodeModule from 'node:module';
import type { Writable } from 'node:stream';
import { createWriteStream, fstatSync } from 'node:fs';
import { errorLinesForJournal, isJournalStream } from './platform/journal-priority.js';

/** After a stop signal the process is gone within this time, cleanly or not. */
const STOP_DEADLINE_MS = 10_000;

/**
 * Where `run` logs: Node's stdout stream when it is a pipe or a socket (journald's stream, a shell
 * pipe: libuv writes it without blocking), else a write stream on fd 1 whose writes go through the
 * thread pool (Node's stdout would write a file or a terminal synchronously, on the event loop).
 */
function logOutput(): Writable {
  try {
    const st = fstatSync(1);
    if (st.isFIFO() || st.isSocket()) return process.stdout;
  } catch {
    // no stdout to stat: the write stream reports its own failure, and the sink drops
  }
  return createWriteStream('', { fd: 1, autoClose: false });
}

/** Whether fd 1 (or 2) is the journal stream systemd names in JOURNAL_STREAM (a service's output). */
function isJournal(fd: 1 | 2, env: NodeJS.ProcessEnv): boolean {
  try {
    return isJournalStream(env['JOURNAL_STREAM'], fstatSync(fd, { bigint: true }));
  } catch {
    return false;
  }
}

async function dispatch(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  switch (args.verb) {
    case 'help':
      ctx.stdout(USAGE);
      return EXIT_OK;
    case 'version':
      ctx.stdout(`${agentVersion()}\n`);
      return EXIT_OK;
    case 'run': {
      // The config is validated on its worker thread while this thread loads the agent's modules.
      const loading = (await import('./cli/load-config.js')).loadForCommand(args.config, ctx, args.verb, true);
      loading.catch(() => {}); // awaited (and its failure reported) by runCommand
      return (await import('./cli/commands/run.js')).runCommand(args, ctx, loading);
    }
    case 'check':
      return (await import('./cli/commands/check.js')).checkCommand(args, ctx);
    case 'simulate':
      return (await import('./cli/commands/simulate.js')).simulateCommand(args, ctx);
    case 'doctor':
      return (await import('./cli/commands/doctor.js')).doctorCommand(args, ctx);
    case 'start':
      return (await import('./cli/commands/start.js')).startCommand(args, ctx);
    case 'outbox':
      return (await import('./cli/commands/outbox.js')).outboxCommand(args, ctx);
    case 'demo':
      return (await import('./cli/commands/demo.js')).demoCommand(args, ctx);
    case 'gpio':
      return (await import('./cli/commands/gpio.js')).gpioCommand(args, ctx);
    case 'secrets':
      return (await import('./cli/commands/secrets.js')).secretsCommand(args, ctx);
    case 'schema':
      return (await import('./cli/commands/schema.js')).schemaCommand(ctx);
  }
}

const MIN_NODE = [22, 0];

/**
 * Node's compile cache: the modules a command loads are compiled once per version, then read
 * back (start-up time on a Pi). Kept in systemd's CacheDirectory for the service, else where
 * NODE_COMPILE_CACHE says, else under the system's temporary folder. Written only when code is
 * new to it, so an unchanged box writes nothing at start.
 */
function compileCache(env: NodeJS.ProcessEnv): void {
  if (env['CHAIR_AGENT_COMPILE_CACHE'] === 'off') return;
  const dir = env['CACHE_DIRECTORY']?.split(':')[0] ?? env['NODE_COMPILE_CACHE'];
  // Looked up, not imported by name: on a Node without it the import would fail before the
  // version check below could say why.
  const enable = (nodeModule as { enableCompileCache?: (dir?: string) => unknown }).enableCompileCache;
  try {
    enable?.(dir);
  } catch {
    // a cache that cannot be had only costs start-up time
  }
}

/**
 * Started by a Node.js older than the agent needs (the distro's `node dist/agent/main.js`, or npx
 * on an npm that did not link the runtime's bin): in a checkout whose `npm ci` brought the pinned
 * runtime, the same command runs on that runtime as a child, with signals passed on and its exit
 * status returned. Elsewhere the refusal says what to type instead. Resolves when a child ran.
 */
async function onOldNode(): Promise<boolean> {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  if (major > (MIN_NODE[0] as number) || (major === MIN_NODE[0] && minor >= (MIN_NODE[1] as number))) return false;
  const runtime = pinnedRuntime(new URL('../../', import.meta.url));
  if (runtime === null) {
    process.stderr.write(`chair-agent: needs Node.js ${MIN_NODE.join('.')} or newer; this is ${process.versions.node}.\n${OLD_NODE_HINT}`);
    process.exit(EXIT_FAILURE);
  }
  const { spawn } = await import('node:child_process');
  const child = spawn(runtime, process.argv.slice(1), { stdio: 'inherit' });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => child.kill(signal));
  child.on('error', (err) => {
    process.stderr.write(`chair-agent: cannot start ${runtime}: ${err.message}\n`);
    process.exit(EXIT_FAILURE);
  });
  child.on('exit', (code, signal) => {
    if (signal !== null) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    }
    process.exit(code ?? EXIT_FAILURE);
  });
  return true;
}

async function main(): Promise<void> {
  if (await onOldNode()) return;
  compileCache(process.env);
  useSystemCaStore(process.env);
  const stop = new AbortController();
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stop.signal.aborted) return;
    stop.abort(signal);
    setTimeout(() => {
      process.stderr.write(`chair-agent: did not stop within ${STOP_DEADLINE_MS / 1000} s; exiting\n`);
      process.exit(EXIT_FAILURE);
    }, STOP_DEADLINE_MS).unref();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.on('unhandledRejection', (reason) => {
    process.stderr.write(`chair-agent: unhandled rejection: ${errorMessage(reason)}\n`);
  });
  // Node.js prints its warnings through a listener of its own; this one takes its place. The
  // other commands print them as Node.js does, but for an experimental API in use (undici's
  // SOCKS5), which is not the user's to act on and would land in doctor's report.
  let onWarning: ((warning: Error) => void) | null = null;
  process.removeAllListeners('warning');
  process.on('warning', (warning) => {
    if (onWarning) onWarning(warning);
    else if (warning.name !== 'ExperimentalWarning') process.stderr.write(`(node:${process.pid}) ${warning.name}: ${warning.message}\n`);
  });

  const ctx: CommandContext = {
    env: process.env,
    stdout: (t) => void process.stdout.write(t),
    stderr: isJournal(2, process.env) ? (t) => void process.stderr.write(errorLinesForJournal(t)) : (t) => void process.stderr.write(t),
    signal: stop.signal,
    stdin: process.stdin.isTTY ? process.stdin : undefined,
    input: process.stdin,
    inputIsTTY: process.stdin.isTTY === true,
    stdoutIsTTY: process.stdout.isTTY === true,
    logOutput,
    stdoutIsJournal: isJournal(1, process.env),
    pid: process.pid,
    onWarning: (handler) => void (onWarning = handler),
  };

  let code: number;
  try {
    const args = parseCli(process.argv.slice(2));
    if (args.help && args.verb !== 'help') {
      ctx.stdout(VERB_HELP[args.verb] ?? USAGE);
      code = EXIT_OK;
    } else {
      code = await dispatch(args, ctx);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      ctx.stderr(`chair-agent: ${err.message}\n\n${USAGE}`);
    } else {
      ctx.stderr(`chair-agent: ${errorMessage(err)}\n`);
    }
    code = EXIT_FAILURE;
  }
  // Let stdout drain before leaving: a piped `check` must not be cut short.
  process.stdout.write('', () => process.exit(code));
}

void main();
