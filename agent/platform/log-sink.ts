import type { Writable } from 'node:stream';
import type { DestinationStream } from 'pino';

/** What a stalled reader may leave queued in the agent: past it, lines are dropped and counted. */
export const LOG_QUEUE_MAX_BYTES = 1024 * 1024;

/**
 * Log lines to standard output when it is a pipe or a socket: journald's stream under systemd, a
 * shell pipe, a test harness. The stream's own write goes to the socket at once, on the event
 * loop (one write call: no thread-pool hand-off and no second wake-up per line, which a Pi pays
 * on every record), and libuv queues what the reader has no room for, so the loop never waits.
 * A reader that stops (journald stalled on its own fsyncs) would grow that queue without bound:
 * past `maxQueuedBytes`, lines are dropped, and a line that says how many is written as soon as
 * the reader has caught up. A broken pipe (the reader gone) drops everything after it; it is not a
 * reason to stop the agent.
 */
export class PipeLogSink implements DestinationStream {
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

  /** The pipe failed (EPIPE: nobody reads it any more). */
  fail(): void {
    this.broken = true;
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
export function pipeLogSink(out: Writable, maxQueuedBytes = LOG_QUEUE_MAX_BYTES, now?: () => Date): PipeLogSink {
  const sink = new PipeLogSink(out, maxQueuedBytes, now);
  out.on('drain', () => sink.reportDropped());
  out.on('error', () => sink.fail());
  return sink;
}
