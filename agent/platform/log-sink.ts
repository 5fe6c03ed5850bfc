import type { Writable } from 'node:stream';
import type { DestinationStream } from 'pino';

/** What a stalled reader may leave queued in the agent: past it, lines are dropped and counted. */
export const LOG_QUEUE_MAX_BYTES = 1024 * 1024;

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
 * reader gone; ENOSPC: a full disk) drops every line after it; it is not a reason to stop the
 * agent, nor to hang its exit retrying.
 */
export class StreamLogSink implements DestinationStream {
  private dropped = 0;
  private broken = false;

  constructor(
    private readonly out: Writable,
    private readonly maxQueuedBytes = LOG_QUEUE_MAX_BYTES,
    private readonly now: () => Date = () => new Date(),
  ) {}

  write(line: string): void {
    if (this.broken || this.out.writableLength >= this.maxQueuedBytes) {
      this.dropped++;
      return;
    }
    this.reportDropped();
    this.out.write(line);
  }

  /** The reader caught up (the stream's 'drain'): the count goes out now, not with some later line. */
  reportDropped(): void {
    if (this.dropped === 0 || this.broken) return;
    this.out.write(droppedLine(this.dropped, this.now()));
    this.dropped = 0;
  }

  /** The stream failed: nothing more can be written to it. */
  fail(): void {
    this.broken = true;
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
function droppedLine(count: number, at: Date): string {
  return `${JSON.stringify({ level: 'warn', time: at.toISOString(), component: 'logger', dropped: count, msg: 'log lines dropped: the log reader fell behind' })}\n`;
}

/**
 * A sink over `out`, which from now on has two listeners: 'drain' reports what was dropped, and
 * 'error' is taken (a failed write must not end the process).
 */
export function streamLogSink(out: Writable, maxQueuedBytes = LOG_QUEUE_MAX_BYTES, now?: () => Date): StreamLogSink {
  const sink = new StreamLogSink(out, maxQueuedBytes, now);
  out.on('drain', () => sink.reportDropped());
  out.on('error', () => sink.fail());
  return sink;
}
