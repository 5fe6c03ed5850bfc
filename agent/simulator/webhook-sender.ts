import { Agent, request, type Dispatcher } from 'undici';
import type { Clock } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import { errorMessage } from '../platform/errors.js';
import { signBody } from '../http/sign.js';

export interface WebhookTarget {
  url: string;
  secret: string;
}

/**
 * Sends transaction records to the customer's webhook, one at a time in order, signed as the
 * vendor does, retrying a failed delivery a few times.
 */
export class WebhookSender {
  private queue: Promise<void> = Promise.resolve();
  private dispatcher: Dispatcher | null = null;
  private stopped = false;
  /** Set by retarget(): where the target listens may be known only after the simulator starts. */
  private url: string | null = null;
  sent = 0;
  failed = 0;

  constructor(
    private readonly target: WebhookTarget,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly attempts = 4,
  ) {}

  send(record: Record<string, unknown>): void {
    const body = JSON.stringify(record);
    this.queue = this.queue.then(() => this.deliver(body));
  }

  /** Sends from now on to `url`, with the same secret. */
  retarget(url: string): void {
    this.url = url;
  }

  /** Resolves when everything queued so far has been delivered or given up. */
  idle(): Promise<void> {
    return this.queue;
  }

  stop(): void {
    this.stopped = true;
    void this.dispatcher?.close();
  }

  /**
   * An https:// webhook is sent without checking the site's certificate: it names the site's
   * public host (or is the site's own), and the simulator reaches the box at a local address.
   * The simulator stands in for the vendor's webhook, not for its trust in certificates.
   */
  private dispatcherFor(url: string): Dispatcher | undefined {
    if (!url.startsWith('https:')) return undefined;
    this.dispatcher ??= new Agent({ connect: { rejectUnauthorized: false } });
    return this.dispatcher;
  }

  private async deliver(body: string): Promise<void> {
    for (let attempt = 1; attempt <= this.attempts && !this.stopped; attempt++) {
      try {
        const url = this.url ?? this.target.url;
        const dispatcher = this.dispatcherFor(url);
        const res = await request(url, {
          ...(dispatcher ? { dispatcher } : {}),
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-vendor-signature': signBody(body, this.target.secret) },
          body,
          headersTimeout: 10_000,
          bodyTimeout: 10_000,
        });
        await res.body.dump();
        if (res.statusCode === 200) {
          this.sent += 1;
          return;
        }
        this.logger.warn({ status: res.statusCode, attempt }, 'webhook delivery refused');
      } catch (err) {
        this.logger.warn({ err: errorMessage(err), attempt }, 'webhook delivery failed');
      }
      if (attempt < this.attempts) await this.clock.sleep(250 * 2 ** attempt);
    }
    this.failed += 1;
  }
}
