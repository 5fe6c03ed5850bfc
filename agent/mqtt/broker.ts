import type { EventEmitter } from 'node:events';

export interface PublishOptions {
  qos: 0 | 1;
  retain?: boolean;
  /** MQTT 5 only; ignored on 3.1.1. */
  correlationData?: Buffer;
}

export interface InboundMessage {
  topic: string;
  payload: Buffer;
  /** Delivered from the broker's retained store rather than published just now. */
  retained: boolean;
  responseTopic?: string;
  correlationData?: Buffer;
}

export interface BrokerEvents {
  connect: [];
  close: [];
  message: [InboundMessage];
}

/**
 * The port to the site's MQTT broker. `publish` resolves when the broker has acknowledged a
 * QoS 1 message (PUBACK) and rejects when it cannot be; QoS 0 resolves once written.
 */
export interface Broker extends EventEmitter<BrokerEvents> {
  readonly connected: boolean;
  /** Starts connecting (and reconnecting) in the background. */
  connect(): void;
  /** Resolves once the first connection attempt has succeeded or failed. */
  firstAttempt(): Promise<void>;
  publish(topic: string, payload: string | Buffer, options: PublishOptions): Promise<void>;
  subscribe(filter: string): Promise<void>;
  unsubscribe(filter: string): Promise<void>;
  /** How many QoS 1 messages the broker accepts in flight (its Receive Maximum). */
  receiveMaximum(): number;
  /** Closes the connection; waits at most `timeoutMs` for in-flight acknowledgements. */
  end(timeoutMs: number): Promise<void>;
  /** The broker's address, safe to print (no password). */
  readonly description: string;
}
