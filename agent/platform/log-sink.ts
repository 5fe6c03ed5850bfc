import type { Writable } from 'node:stream';
import type { DestinationStream } from 'pino';
import { withJournalPriority } from './journal-priority.js';

/** What a stalled reader may leave queued in the agent: past it, lines are dropped and counted. */
export const LOG_QUEUE_MAX_BYTES = 1024 * 1024;
/** After a stream fails, a new one is tried this often (when the sink can open one). */
export const LOG_RETRY_MS = 5_000;

export interface LogSinkOptions {
  /** Past this many bytes queued, lines are dropped and counted (default LOG_QUEUE_MAX_BYTES). */
  maxQueuedBytes?: number;
  now?: () => Date;
  /**
   * A new stream to the same place, tried every `retryMs` after the current one failed (a file on
   * a disk that was full). Without it, or when it gives back the stream that failed (a pipe whose
   * reader is gone), lines stay dropped.
   */
  reopen?: () => Writable;
  retryMs?: number;
  /** The stream is journald's: each line starts with its priority (journal-priority.ts). */
  journal?: boolean;
}

/**
 * Log lines to standard output, as `run` writes them, so that nothing stdout does can stop the
 * agent. Two kinds of stream come here (main.ts picks): when stdout is a pipe or a socket
 * (journald's stream under systemd, a shell pipe, a test harness), Node's own stdout stream,
 * which writes each line at once on the event loop (one write call: no thread-pool hand-off and
 * no second wake-up per line, which a Pi pays on every record) and lets libuv queue what the
 * reader has no room for; otherwise (a file, /dev/null, a terminal) an fs write stream on fd 1,
 * whose writes go through the thread pool, so a slow disk or a paused terminal never holds the
 * loop either.
 * A reader that stops (journald stalled on its own fsyncs), or a terminal paused with Ctrl-S,
 * would grow the queue without bound: past `maxQueuedBytes`, lines are dropped, and a line that
 * says how many is written as soon as the reader has caught up. A stream that fails (EPIPE: the
 * reader gone; ENOSPC: a full disk) drops the lines after it; it is not a reason to stop the
 * agent, nor to hang its exit retrying. With `reopen`, a new stream is tried every `retryMs`
 * (a file on a disk that has room again, a log file truncated under its size limit), and the
 * first line it takes says how many were dropped meanwhile.
 */
export class StreamLogSink implements DestinationStream {
  private dropped = 0;
  private broken = false;
  private retryTimer: NodeJS.Timeout | null = null;
  /** Lines were dropped because a stream failed, not (only) because its reader was behind. */
  private failedSince = false;

  constructor(
    private out: Writable,
    private readonly opts: LogSinkOptions = {},
  ) {}

  private get maxQueuedBytes(): number {
    return this.opts.maxQueuedBytes ?? LOG_QUEUE_MAX_BYTES;
  }

  private now(): Date {
    return this.opts.now?.() ?? new Date();
  }

  /** Takes the stream's events: 'drain' reports what was dropped; 'error' is taken (a failed write must not end the process). */
  attach(out: Writable): void {
    out.on('drain', () => {
      if (out === this.out) this.reportDropped();
    });
    out.on('error', () => {
      if (out === this.out) this.fail();
    });
  }

  write(line: string): void {
    if (this.broken || this.out.writableLength >= this.maxQueuedBytes) {
      this.dropped++;
      return;
    }
    this.reportDropped();
    this.out.write(this.opts.journal ? withJournalPriority(line) : line);
  }

  /** The reader caught up (the stream's 'drain'): the count goes out now, not with some later line. */
  reportDropped(): void {
    if (this.dropped === 0 || this.broken) return;
    const count = this.dropped;
    this.dropped = 0;
    // If this write fails too (the file still full), the count is kept for the next stream.
    const line = droppedLine(count, this.failedSince, this.now());
    this.out.write(this.opts.journal ? withJournalPriority(line) : line, (err) => {
      if (err) this.dropped += count;
    });
    this.failedSince = false;
  }

  /** The stream failed: nothing more can be written to it; a new one is tried later, if the sink can open one. */
  fail(): void {
    this.broken = true;
    this.failedSince = true;
    if (this.opts.reopen && !this.retryTimer) this.retryTimer = setTimeout(() => this.retry(), this.opts.retryMs ?? LOG_RETRY_MS).unref();
  }

  private retry(): void {
    this.retryTimer = null;
    let next: Writable;
    try {
      next = (this.opts.reopen as () => Writable)();
    } catch {
      return this.fail();
    }
    // The same stream again is a pipe whose reader is gone: it never comes back.
    if (next === this.out) return;
    if (next.destroyed) return this.fail();
    this.out = next;
    this.broken = false;
    this.attach(next);
    this.reportDropped();
  }

  /** No more retries (the command is ending). */
  close(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
  }

  /**
   * Resolves once what is queued has been written, or the stream has failed: what `run` awaits
   * before it returns its exit code. A reader that never catches up is the stop deadline's
   * (main.ts) to end.
   */
  flushed(): Promise<void> {
    if (this.broken || this.out.writableLength === 0) return Promise.resolve();
    // An empty write's callback comes after every write before it, failed or not. ('drain' would
    // not do: a stream emits it only after a write past its high-water mark.)
    return new Promise((resolve) => this.out.write('', () => resolve()));
  }

  /** Lines dropped since the last one written. */
  get droppedLines(): number {
    return this.dropped;
  }
}

/** The line that reports drops, in the logger's own format (pino's JSON with level labels). */
function droppedLine(count: number, failed: boolean, at: Date): string {
  const why = failed ? 'writing them failed (a full disk?); written again since' : 'the log reader fell behind';
  return `${JSON.stringify({ level: 'warn', time: at.toISOString(), component: 'logger', dropped: count, msg: `log lines dropped: ${why}` })}\n`;
}

/**
 * A sink over `out`, which from now on has two listeners: 'drain' reports what was dropped, and
 * 'error' is taken (a failed write must not end the process).
 */
export function streamLogSink(out: Writable, opts: LogSinkOptions = {}): StreamLogSink {
  const sink = new StreamLogSink(out, opts);
  sink.attach(out);
  return sink;
}
