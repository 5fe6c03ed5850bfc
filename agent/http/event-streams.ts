import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Clock, Timer } from '../platform/clock.js';
import { sendJson } from './body.js';
import type { ClientAddress } from './client-address.js';

export interface EventStreamLimits {
  /** Streams open at once; one more is answered 503 (the Pi is not a web server). */
  max: number;
  /** Streams from one address at once: a phone, a tablet, a second tab. */
  perClient: number;
  /** A stream ends after this; the browser's EventSource reconnects by itself (retry: 2000). */
  lifetimeMs: number;
  /** Unsent bytes a stream may fall behind by before it is dropped (a reader that does not read). */
  maxBacklogBytes: number;
}

interface Stream {
  res: ServerResponse;
  remote: string;
  lifetime: Timer;
}

/**
 * Server-sent event streams with every bound a viewer could otherwise break: how many at once,
 * per address, how long each lives, and how far one may fall behind. A reader that stops reading
 * is dropped as soon as its unsent bytes pass the limit, so it cannot keep the agent's memory.
 */
export class EventStreams {
  private readonly streams = new Set<Stream>();

  constructor(
    private readonly limits: EventStreamLimits,
    private readonly clock: Clock,
    private readonly onDrop: (remote: string, why: string) => void = () => undefined,
    private readonly clientOf: ClientAddress = (req) => req.socket.remoteAddress ?? '?',
  ) {}

  get size(): number {
    return this.streams.size;
  }

  /** Opens a stream on this request with its first event, or answers 503 when over a limit. */
  open(req: IncomingMessage, res: ServerResponse, first: string): boolean {
    const remote = this.clientOf(req);
    if (this.streams.size >= this.limits.max) {
      sendJson(res, 503, { error: `at most ${this.limits.max} viewers at once` }, { 'retry-after': '30' });
      return false;
    }
    if ([...this.streams].filter((s) => s.remote === remote).length >= this.limits.perClient) {
      sendJson(res, 503, { error: `at most ${this.limits.perClient} viewers from one address` }, { 'retry-after': '30' });
      return false;
    }
    // A stream is quiet between changes: the listener's idle timeout must not cut it (the
    // heartbeat, the lifetime and the backlog limit bound it instead).
    req.socket.setTimeout(0);
    // x-accel-buffering: nginx in front (the site's reverse proxy) would otherwise hold events
    // back until its buffer fills, and the page would not update.
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive', 'x-accel-buffering': 'no' });
    const stream: Stream = {
      res,
      remote,
      lifetime: this.clock.setTimeout(() => {
        this.streams.delete(stream);
        res.end();
      }, this.limits.lifetimeMs),
    };
    this.streams.add(stream);
    const forget = (): void => {
      stream.lifetime.cancel();
      this.streams.delete(stream);
    };
    req.on('close', forget);
    res.on('error', forget);
    res.write(first);
    return true;
  }

  /** Writes to every stream; one that has fallen too far behind is dropped instead. */
  broadcast(data: string): void {
    for (const s of [...this.streams]) {
      if (s.res.writableLength > this.limits.maxBacklogBytes) {
        this.drop(s, `${s.res.writableLength} bytes unsent: the reader does not read`);
        continue;
      }
      s.res.write(data);
    }
  }

  /** Ends every stream (the page stops). */
  closeAll(): void {
    for (const s of [...this.streams]) {
      s.lifetime.cancel();
      s.res.end();
    }
    this.streams.clear();
  }

  private drop(s: Stream, why: string): void {
    s.lifetime.cancel();
    this.streams.delete(s);
    s.res.destroy();
    this.onDrop(s.remote, why);
  }
}
