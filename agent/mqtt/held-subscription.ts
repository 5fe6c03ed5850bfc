import { errorMessage } from '../platform/errors.js';
import type { Logger } from '../platform/logger.js';
import type { Broker, SubscribeOptions } from './broker.js';

/**
 * A subscription its owner holds from start() to stop(): made on every connect (a broker that
 * lost the session has forgotten it) and at start when already connected. A refusal (an ACL that
 * denies the filter) is logged and the agent goes on without it: it never ends the connection.
 */
export class HeldSubscription {
  constructor(
    private readonly broker: Broker,
    private readonly filter: string,
    private readonly options: SubscribeOptions,
    private readonly logger: Logger,
    /** What the failure line names: "cannot subscribe to <what>". */
    private readonly what: string,
  ) {}

  private readonly subscribe = (): void => {
    this.broker.subscribe(this.filter, this.options).catch((err: unknown) => {
      this.logger.warn({ err: errorMessage(err) }, `cannot subscribe to ${this.what}`);
    });
  };

  start(): void {
    this.broker.on('connect', this.subscribe);
    if (this.broker.connected) this.subscribe();
  }

  async stop(): Promise<void> {
    this.broker.off('connect', this.subscribe);
    await this.broker.unsubscribe(this.filter);
  }
}
