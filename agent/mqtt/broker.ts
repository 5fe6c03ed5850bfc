import type { EventEmitter } from 'node:events';
import { AgentError } from '../platform/errors.js';

/**
 * Why a publish did not get its PUBACK:
 * - disconnected: the connection ended first; nothing is known about the message, send it again;
 * - refused: the broker answered with an MQTT 5 reason code of 0x80 or more (`reasonCode`);
 * - invalid: it could not be sent at all (too large for the broker, an unusable topic).
 */
export type BrokerErrorKind = 'disconnected' | 'refused' | 'invalid';

export class BrokerError extends AgentError {
  constructor(
    readonly kind: BrokerErrorKind,
    message: string,
    readonly reasonCode?: number,
  ) {
    super(`BROKER_${kind.toUpperCase()}`, message);
    this.name = 'BrokerError';
  }
}

export interface PublishOptions {
  qos: 0 | 1;
  retain?: boolean;
  /** MQTT 5 only; ignored on 3.1.1. */
  correlationData?: Buffer;
  /**
   * The publisher has a smaller form of this payload and sends it at once if this one is refused
   * as too large (0x95): such a refusal is counted, but not warned of, since nothing is lost.
   */
  smallerIfTooLarge?: boolean;
}

export interface InboundMessage {
  topic: string;
  payload: Buffer;
  /** Delivered from the broker's retained store rather than published just now. */
  retained: boolean;
  responseTopic?: string;
  correlationData?: Buffer;
}

export interface SubscribeOptions {
  /** MQTT 5 Retain As Published: live deliveries keep the retain flag their publisher set. */
  retainAsPublished?: boolean;
}

/** What is known of why a connection ended. */
export interface CloseInfo {
  /**
   * The publish (not a transaction) the close is put down to: one the broker refused within 2 s
   * before closing, or a suspect that was alone in flight. Null when unknown.
   */
  cause: string | null;
  /** Publishes other than transactions were in flight: the close may be theirs. */
  othersInFlight: boolean;
}

export interface BrokerEvents {
  connect: [];
  close: [info?: CloseInfo];
  /** Publishes other than transactions that were suspects of a drop are all cleared (see settling). */
  settled: [];
  message: [InboundMessage];
}

/**
 * The port to the site's MQTT broker. `publish` resolves when the broker has acknowledged a
 * QoS 1 message (PUBACK) and rejects with a BrokerError when it cannot be; QoS 0 resolves once
 * written. Nothing is re-sent behind the caller's back after a reconnect: a publish that was under
 * way when the connection ended rejects as `disconnected`, and its owner decides.
 */
export interface Broker extends EventEmitter<BrokerEvents> {
  readonly connected: boolean;
  /** Starts connecting (and reconnecting) in the background. */
  connect(): void;
  /** Resolves once the first connection attempt has succeeded or failed. */
  firstAttempt(): Promise<void>;
  /** Why no connection can be tried now (a TLS file that cannot be read), or null. */
  readonly problem?: string | null;
  publish(topic: string, payload: string | Buffer, options: PublishOptions): Promise<void>;
  /**
   * As publish, with a callback instead of a promise (null on success), for the outbox's
   * per-record path: no promise and no microtask per record.
   */
  send(topic: string, payload: string | Buffer, options: PublishOptions, done: (err: BrokerError | null) => void): void;
  /** Runs `fn`, whose publishes go out in one write (the socket is corked until the next tick). */
  batch(fn: () => void): void;
  subscribe(filter: string, options?: SubscribeOptions): Promise<void>;
  unsubscribe(filter: string): Promise<void>;
  /** How many QoS 1 messages the broker accepts in flight (its Receive Maximum). */
  receiveMaximum(): number;
  /** The largest packet the broker accepts (its Maximum Packet Size), when it said. */
  maximumPacketSize(): number | undefined;
  /** Closes the connection; waits at most `timeoutMs` for in-flight acknowledgements. */
  end(timeoutMs: number): Promise<void>;
  /** The broker's address, safe to print (no password). */
  readonly description: string;
  /**
   * True while publishes other than transactions are being sent one at a time to find the one the
   * broker drops the connection on: a transaction sent alone meanwhile could be blamed for it.
   */
  settling?(): boolean;
  /**
   * Told from a `close` listener, while the connection's end is being handled: the broker closed
   * it for a publish it refused (the refusal guard read the refusal just before, or held a topic
   * that was alone in flight at two closes). Such a close says nothing of another client holding
   * this client id, so it does not count towards the wait that a broker closing every connection
   * at once earns.
   */
  closedForPublish?(): void;
}
