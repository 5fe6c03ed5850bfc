import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import type { Logger } from '../logger.js';
import { errorMessage } from '../errors.js';
import { redactUrl } from '../config/mask.js';
import type { Broker, BrokerEvents, InboundMessage, PublishOptions } from './broker.js';

export interface MqttBrokerOptions {
  url: string;
  clientId: string;
  username?: string | undefined;
  password?: string | undefined;
  ca?: string | undefined;
  cert?: string | undefined;
  key?: string | undefined;
  rejectUnauthorized: boolean;
  protocolVersion: 4 | 5;
  keepaliveSeconds: number;
  reconnectSeconds: number;
  will: { topic: string; payload: string };
  logger: Logger;
}

/** The Broker port on mqtt.js v5. */
export class MqttBroker extends EventEmitter<BrokerEvents> implements Broker {
  private client: MqttClient | null = null;
  readonly description: string;
  private lastError = '';
  private serverReceiveMaximum = 65_535;
  private attempted: Promise<void> = new Promise(() => undefined);

  constructor(private readonly opts: MqttBrokerOptions) {
    super();
    this.description = redactUrl(opts.url);
  }

  get connected(): boolean {
    return this.client?.connected ?? false;
  }

  connect(): void {
    if (this.client) return;
    const o = this.opts;
    const options: IClientOptions = {
      clientId: o.clientId,
      protocolVersion: o.protocolVersion,
      clean: true,
      keepalive: o.keepaliveSeconds,
      reconnectPeriod: Math.round(o.reconnectSeconds * 1000),
      connectTimeout: 10_000,
      // Retained state is republished on every connect; nothing stale is queued while offline.
      queueQoSZero: false,
      rejectUnauthorized: o.rejectUnauthorized,
      will: { topic: o.will.topic, payload: Buffer.from(o.will.payload), qos: 1, retain: true },
    };
    if (o.username !== undefined) options.username = o.username;
    if (o.password !== undefined) options.password = o.password;
    if (o.ca) options.ca = readFileSync(o.ca);
    if (o.cert) options.cert = readFileSync(o.cert);
    if (o.key) options.key = readFileSync(o.key);
    const client = mqtt.connect(o.url, options);
    this.client = client;
    this.attempted = new Promise((resolve) => {
      for (const event of ['connect', 'error', 'close', 'offline'] as const) client.once(event, () => resolve());
    });
    client.on('connect', (connack) => {
      // mqtt.js leaves Nagle's algorithm on: small PUBLISH packets would wait for delayed ACKs.
      (client.stream as { setNoDelay?: (on: boolean) => void } | undefined)?.setNoDelay?.(true);
      this.lastError = '';
      this.serverReceiveMaximum = connack.properties?.receiveMaximum ?? 65_535;
      o.logger.info({ broker: this.description }, 'connected to the broker');
      this.emit('connect');
    });
    client.on('close', () => this.emit('close'));
    client.on('error', (err) => {
      const text = errorMessage(err);
      // mqtt.js reports the same refusal on every reconnect attempt; say it once.
      if (text !== this.lastError) o.logger.warn({ broker: this.description, err: text }, 'broker connection error');
      this.lastError = text;
    });
    client.on('offline', () => o.logger.debug({ broker: this.description }, 'broker offline, will retry'));
    client.on('message', (topic, payload, packet) => {
      const msg: InboundMessage = { topic, payload, retained: packet.retain === true };
      const props = packet.properties;
      if (props?.responseTopic) msg.responseTopic = props.responseTopic;
      if (props?.correlationData) msg.correlationData = Buffer.from(props.correlationData);
      this.emit('message', msg);
    });
  }

  firstAttempt(): Promise<void> {
    return this.attempted;
  }

  publish(topic: string, payload: string | Buffer, options: PublishOptions): Promise<void> {
    const client = this.client;
    if (!client) return Promise.reject(new Error('not connected to the broker'));
    return new Promise((resolve, reject) => {
      const props = options.correlationData && this.opts.protocolVersion === 5 ? { correlationData: options.correlationData } : undefined;
      client.publish(topic, payload, { qos: options.qos, retain: options.retain ?? false, ...(props ? { properties: props } : {}) }, (err) => {
        if (err) reject(err);
        else resolve();
      });
    });
  }

  subscribe(filter: string): Promise<void> {
    const client = this.client;
    if (!client) return Promise.reject(new Error('not connected to the broker'));
    return new Promise((resolve, reject) => {
      client.subscribe(filter, { qos: 1 }, (err) => (err ? reject(err) : resolve()));
    });
  }

  /** Resolves on the broker's UNSUBACK, or after a second without one. */
  unsubscribe(filter: string): Promise<void> {
    const client = this.client;
    if (!client || !client.connected) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, 1_000);
      client.unsubscribe(filter, () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  receiveMaximum(): number {
    return this.serverReceiveMaximum;
  }

  end(timeoutMs: number): Promise<void> {
    const client = this.client;
    this.client = null;
    if (!client) return Promise.resolve();
    return new Promise((resolve) => {
      let done = false;
      const finish = (): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => client.end(true, finish), timeoutMs);
      client.end(false, finish);
    });
  }
}
