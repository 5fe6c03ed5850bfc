import { EventEmitter } from 'node:events';
import type { IClientPublishOptions, MqttClient } from 'mqtt';
import type { Clock, Timer } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import { errorMessage } from '../platform/errors.js';
import { redactUrl } from '../config/redact.js';
import { FLAP_MS, FLAPS_BEFORE_BACKOFF, flapDelay, reconnectDelay, STABLE_MS } from '../core/backoff.js';
import { connectClient, type BrokerEndpoint } from './client-options.js';
import { brokerTlsProblems, filesSignature } from '../platform/tls-files.js';
import { overPacketLimit, PACKET_TOO_LARGE } from './packet-size.js';
import { IDENTIFIER_FIX, isKeepaliveSuspect, keepaliveFix, shorterKeepalive } from './keepalive-refusal.js';
import { brokerErrorText, INSPECTION_FIX } from './proxy-tunnel.js';
import './lenient-acks.js';
import { BrokerError, type Broker, type BrokerEvents, type InboundMessage, type PublishOptions, type SubscribeOptions } from './broker.js';

export { MAX_INCOMING_PACKET_BYTES } from './client-options.js';

export interface MqttBrokerOptions extends BrokerEndpoint {
  clientId: string;
  keepaliveSeconds: number;
  /** The longest wait between reconnect attempts of a long outage. */
  reconnectSeconds: number;
  will: { topic: string; payload: string };
  clock: Clock;
  logger: Logger;
  random?: () => number;
  /** How often TLS files that could not be read are tried again (a minute). */
  filesRetryMs?: number;
}

type PendingAcks = Record<string, { cmd?: string; cb?: (err?: Error) => void }>;

/** How often TLS files that could not be read are tried again. */
const FILES_RETRY_MS = 60_000;

/** MQTT 5's CONNACK reason "Retain not supported": a retained will, to a broker that keeps nothing. */
const RETAIN_NOT_SUPPORTED = 0x9a;
/** Connections in a row closed before the broker's CONNACK, with no error, before the warning. */
const SILENT_CLOSES_WARNED = 3;

/** MQTT 5's DISCONNECT reason "Session taken over". */
const SESSION_TAKEN_OVER = 0x8e;
const CLIENT_ID_FIX =
  "every agent on a broker needs its own client id (mqtt.clientId, by default chair-agent-<site.id>): look for a second box configured as this site, or an old one still running; a broker that gives each login the client id of its user name (Mosquitto: use_username_as_clientid) does this to the agent whenever its user logs in elsewhere, chair-agent doctor included";

/**
 * The Broker port on mqtt.js v5. Reconnects itself, with a short jittered backoff that grows
 * during a long outage (core/backoff.ts), because mqtt.js's own reconnect waits a fixed period
 * and replays its in-flight store before anyone hears of the reconnect: a record the broker
 * cannot take would go out again at every reconnect. Here a publish under way when the
 * connection ends rejects as `disconnected` and mqtt.js starts each connection with an empty store.
 */
/** Publish options without properties (mqtt.js copies what it is given, so these are shared). */
const PLAIN: Readonly<Record<string, IClientPublishOptions>> = {
  '0-false': Object.freeze({ qos: 0, retain: false }),
  '1-false': Object.freeze({ qos: 1, retain: false }),
  '0-true': Object.freeze({ qos: 0, retain: true }),
  '1-true': Object.freeze({ qos: 1, retain: true }),
};

export class MqttBroker extends EventEmitter<BrokerEvents> implements Broker {
  private client: MqttClient | null = null;
  readonly description: string;
  private lastError = '';
  private serverReceiveMaximum = 65_535;
  private serverMaximumPacketSize: number | undefined;
  private attempted: Promise<void> = new Promise(() => undefined);
  private reconnectTimer: Timer | null = null;
  /** Clients ended for one made with renewed TLS files. */
  private readonly replaced = new WeakSet<MqttClient>();
  /** The TLS files the client was made with (filesSignature): a change is a renewal. */
  private filesSeen = '';
  /** Why changed TLS files were not taken, as last said. */
  private renewProblem = '';
  /** Set while a TLS file cannot be read: the next try (waitForFiles). */
  private filesTimer: Timer | null = null;
  /**
   * The keepalive the broker accepted after refusing the configured one (MQTT 3.1.1:
   * keepalive-refusal.ts), kept for the rest of the run; null while the configured one serves.
   */
  private keepaliveNow: number | null = null;
  /** A CONNACK that a shorter keepalive may get past came on this connection. */
  private keepaliveRefused = false;
  /** The ladder ran out: the broker refuses the client id itself, so it is not walked again. */
  private keepaliveExhausted = false;
  /** The shorter keepalive that was said to be in use. */
  private keepaliveSaid: number | null = null;
  /**
   * The broker keeps no retained messages (Mosquitto's retain_available false): it refuses a
   * retained will at CONNECT and ends the connection at a retained publish. Then the will and
   * every publish go without retain, so the transactions are delivered and the state is live.
   */
  private retainless = false;
  private retainSaid = false;
  /** The CONNACK refused the retained will: the next attempt goes without it. */
  private retainRefused = false;
  /** An error came on the current attempt (a refusal, ECONNREFUSED, TLS). */
  private attemptErrored = false;
  /** Connections in a row that the broker closed before its CONNACK, with no error. */
  private silentCloses = 0;
  /**
   * MQTT 3.1.1 has no way to refuse a retained will but closing the socket (Mosquitto's
   * retain_available false). After closes in a row, one attempt goes without retain: taken,
   * the broker keeps no retained messages and the agent does without; closed too, it is another
   * cause (max_connections), and retain comes back. Tried once per run.
   */
  private retainProbe: 'unused' | 'next' | 'trying' | 'restore' | 'done' = 'unused';
  private attempt = 0;
  private outageSince: number | null = null;
  private ending = false;
  /** When the broker last accepted the connection (monotonic ms). */
  private connectedAt: number | null = null;
  /** Connections in a row that the broker ended within FLAP_MS of accepting them. */
  private flaps = 0;
  /** The reason code of the broker's DISCONNECT (MQTT 5) that ended this connection, if it sent one. */
  private serverDisconnect: number | null = null;
  /** The refusal guard put the close being handled down to a publish (closedForPublish). */
  private closeForPublish = false;
  private lastDisconnectLogged: number | null = null;

  constructor(private readonly opts: MqttBrokerOptions) {
    super();
    this.description = redactUrl(opts.url);
  }

  get connected(): boolean {
    return this.client?.connected ?? false;
  }

  get problem(): string | null {
    return this.filesTimer ? this.lastError : null;
  }

  connect(): void {
    if (this.client || this.filesTimer || this.ending) return;
    const o = this.opts;
    // Read and checked here, so a bad file is named by its config key (OpenSSL's "key values
    // mismatch" names no file) and nothing is thrown from inside mqtt.js.
    const problems = brokerTlsProblems(o);
    let client: MqttClient | null = null;
    try {
      if (problems.length === 0) {
        const will = { ...o.will, retain: !this.retainless };
        client = connectClient(o, { clientId: o.clientId, keepaliveSeconds: this.keepaliveNow ?? o.keepaliveSeconds, connectTimeoutMs: 10_000, will }, o.logger);
      }
    } catch (err) {
      problems.push(errorMessage(err));
    }
    if (!client) {
      this.waitForFiles(problems.join('; '));
      return;
    }
    this.filesSeen = this.filesNow();
    this.client = client;
    this.attemptErrored = false;
    this.attempted = new Promise((resolve) => {
      for (const event of ['connect', 'error', 'close', 'offline'] as const) client.once(event, () => resolve());
    });
    client.on('connect', (connack) => {
      // mqtt.js leaves Nagle's algorithm on: small PUBLISH packets would wait for delayed ACKs.
      (client.stream as { setNoDelay?: (on: boolean) => void } | undefined)?.setNoDelay?.(true);
      this.lastError = '';
      this.attempt = 0;
      this.outageSince = null;
      this.serverReceiveMaximum = connack.properties?.receiveMaximum ?? 65_535;
      this.serverMaximumPacketSize = connack.properties?.maximumPacketSize;
      this.connectedAt = o.clock.monotonic();
      this.silentCloses = 0;
      if (this.retainProbe === 'trying') this.retainProbe = 'done';
      this.serverDisconnect = null;
      this.closeForPublish = false;
      o.logger.info({ broker: this.description }, 'connected to the broker');
      if (connack.properties?.retainAvailable === false) this.retainless = true;
      if (this.retainless && !this.retainSaid) {
        this.retainSaid = true;
        o.logger.warn(
          { broker: this.description, fix: "let the broker keep retained messages (Mosquitto: retain_available true) for a subscriber to see the state as soon as it connects" },
          'the broker keeps no retained messages: the agent publishes its state, availability and discovery without retain (a subscriber sees each at its next change, Home Assistant at its birth message); transactions are not affected',
        );
      }
      if (this.keepaliveNow !== null && this.keepaliveNow !== this.keepaliveSaid) {
        this.keepaliveSaid = this.keepaliveNow;
        o.logger.warn(
          { broker: this.description, configured: o.keepaliveSeconds, keepaliveSeconds: this.keepaliveNow, fix: keepaliveFix(o.keepaliveSeconds, this.keepaliveNow) },
          `the broker refused a keepalive of ${o.keepaliveSeconds} s ("Identifier rejected", as Mosquitto says of one over its max_keepalive) and accepted ${this.keepaliveNow} s, which the agent keeps`,
        );
      }
      this.emit('connect');
    });
    client.on('close', () => this.onClose(client));
    // MQTT 5: the broker says why it ends the connection (Mosquitto 2.1 sends 0x8E to the client
    // whose session another one with the same client id took over; 2.0 just closes the socket).
    client.on('disconnect', (packet) => {
      const code = packet.reasonCode ?? 0;
      this.serverDisconnect = code;
      // The same reason at every reconnect is said once, as connection errors are.
      if (code !== SESSION_TAKEN_OVER && code !== this.lastDisconnectLogged)
        o.logger.warn({ broker: this.description, reasonCode: `0x${code.toString(16)}`, reason: packet.properties?.reasonString }, 'the broker ended the connection');
      this.lastDisconnectLogged = code;
    });
    client.on('error', (err) => {
      const text = brokerErrorText(err, o.proxy);
      this.attemptErrored = true;
      const suspect = !client.connected && !this.keepaliveExhausted && isKeepaliveSuspect(err, o.protocolVersion);
      if (suspect) this.keepaliveRefused = true;
      if (!client.connected && !this.retainless && (err as { code?: unknown }).code === RETAIN_NOT_SUPPORTED && o.protocolVersion === 5) this.retainRefused = true;
      // The same refusal comes back at every attempt; say it once.
      if (text !== this.lastError)
        o.logger.warn(
          { broker: this.description, err: text, ...(suspect ? { next: 'an MQTT 3.1.1 keepalive over the broker\'s max_keepalive is refused so too (Mosquitto 2.0.12 and later): trying a shorter one' } : {}) },
          'broker connection error',
        );
      this.lastError = text;
      // An error on an open connection (a packet the parser cannot read) leaves the stream
      // mid-packet: close it now rather than at the keepalive. A PUBACK's refusal is not one of
      // these (lenient-acks.ts): it settles that publish alone.
      if (client.connected) (client.stream as { destroy?: () => void } | undefined)?.destroy?.();
    });
    client.on('message', (topic, payload, packet) => {
      const msg: InboundMessage = { topic, payload, retained: packet.retain === true };
      const props = packet.properties;
      if (props?.responseTopic) msg.responseTopic = props.responseTopic;
      if (props?.correlationData) msg.correlationData = Buffer.from(props.correlationData);
      this.emit('message', msg);
    });
  }

  /**
   * A TLS file the connection needs cannot be read (a renewal hook that left the key root's own,
   * then a reboot). That must not stop the agent: buttons, polls and the outbox carry on, records
   * wait on disk as in any outage, and the files are tried again every minute.
   */
  private waitForFiles(text: string): void {
    if (text !== this.lastError) this.opts.logger.error({ broker: this.description, code: 'TLS_FILES_INVALID', err: text }, `broker connection not started: ${text}; tried again every minute`);
    this.lastError = text;
    this.attempted = Promise.resolve();
    this.filesTimer = this.opts.clock.setTimeout(() => {
      this.filesTimer = null;
      this.connect();
    }, this.opts.filesRetryMs ?? FILES_RETRY_MS);
  }

  private onClose(client: MqttClient): void {
    // A client replaced by one with renewed files is ended quietly: its close was told already.
    if (this.replaced.has(client)) return;
    // Every publish still waiting for its PUBACK is settled now, so mqtt.js re-sends nothing.
    const outgoing = (client as unknown as { outgoing: PendingAcks }).outgoing;
    for (const id of Object.keys(outgoing)) {
      const pending = outgoing[id];
      delete outgoing[id];
      pending?.cb?.(new BrokerError('disconnected', 'the connection to the broker ended before its acknowledgement'));
    }
    // Listeners run first: the refusal guard's may say the close was for a publish (flapWait).
    this.emit('close');
    if (this.ending || this.client !== client || this.reconnectTimer) return;
    if (this.connectedAt === null && !this.attemptErrored) this.closedSilently();
    const now = this.opts.clock.monotonic();
    this.outageSince ??= now;
    const delay = this.flapWait(now) ?? reconnectDelay(this.attempt++, now - this.outageSince, this.opts.reconnectSeconds * 1000, this.opts.random);
    this.opts.logger.debug({ broker: this.description, delayMs: delay }, 'broker offline, reconnecting');
    this.reconnectTimer = this.opts.clock.setTimeout(() => {
      this.reconnectTimer = null;
      if (this.ending || this.client !== client) return;
      if (this.renewFiles(client) || this.shortenKeepalive(client) || this.dropRetain(client) || this.probeRetain(client)) return;
      this.attemptErrored = false;
      client.reconnect();
    }, delay);
  }

  private filesNow(): string {
    return filesSignature([this.opts.ca, this.opts.cert, this.opts.key]);
  }

  /**
   * TLS files replaced since this client read them (a renewed client certificate, the broker's
   * new CA): a client made with the new ones takes its place, as a renewal needs no restart. New
   * files that do not load (a key copied before its certificate) are said once, and the ones
   * loaded before serve on until the files change again. False when this client reconnects.
   */
  private renewFiles(client: MqttClient): boolean {
    const now = this.filesNow();
    if (now === this.filesSeen) return false;
    const problems = brokerTlsProblems(this.opts);
    if (problems.length > 0) {
      // Said once per problem, though asked at every reconnect (a few a second at first).
      const text = problems.join('; ');
      if (text !== this.renewProblem) this.opts.logger.warn({ broker: this.description, err: text }, 'broker TLS files changed, but cannot be used; connecting with the ones loaded before');
      this.renewProblem = text;
      return false;
    }
    this.renewProblem = '';
    this.opts.logger.info({ broker: this.description }, 'broker TLS files changed; connecting with the new ones');
    return this.replaceClient(client);
  }

  /**
   * After a CONNACK that a shorter keepalive may get past, the next attempt is made with the next
   * shorter one (keepalive-refusal.ts). Refused at the shortest, it is the client id: that is said
   * once, and the configured keepalive serves again. False when this client reconnects as it is.
   */
  private shortenKeepalive(client: MqttClient): boolean {
    if (!this.keepaliveRefused) return false;
    this.keepaliveRefused = false;
    const next = shorterKeepalive(this.keepaliveNow ?? this.opts.keepaliveSeconds);
    if (next === undefined) {
      this.keepaliveExhausted = true;
      this.opts.logger.error({ broker: this.description, clientId: this.opts.clientId, fix: IDENTIFIER_FIX }, 'the broker refuses this client at every keepalive');
      if (this.keepaliveNow === null) return false;
      this.keepaliveNow = null;
    } else {
      this.keepaliveNow = next;
    }
    return this.replaceClient(client);
  }

  /**
   * The MQTT 3.1.1 retain probe (retainProbe): the attempt without retain, and, when that one was
   * closed as well, the return to retain. False when this client reconnects as it is.
   */
  private probeRetain(client: MqttClient): boolean {
    if (this.retainProbe === 'next') {
      this.retainProbe = 'trying';
      this.retainless = true;
      return this.replaceClient(client);
    }
    if (this.retainProbe === 'restore') {
      this.retainProbe = 'done';
      this.retainless = false;
      return this.replaceClient(client);
    }
    return false;
  }

  /** After the CONNACK refused the retained will (MQTT 5), the next attempt goes without retain. */
  private dropRetain(client: MqttClient): boolean {
    if (!this.retainRefused) return false;
    this.retainRefused = false;
    this.retainless = true;
    return this.replaceClient(client);
  }

  /**
   * A connection the broker closed before its CONNACK, with no error: MQTT 3.1.1 has no way to say
   * why. Mosquitto does so to a client whose will it does not allow (retain_available false, or
   * max_qos 0) and when it is at max_connections. Said once, after a few in a row; MQTT 5 names it.
   */
  private closedSilently(): void {
    this.silentCloses += 1;
    if (this.retainProbe === 'trying') {
      // Closed without retain as well: not the retained will. Retain comes back at the next attempt.
      this.retainProbe = 'restore';
      return;
    }
    if (this.silentCloses !== SILENT_CLOSES_WARNED) return;
    const v311 = this.opts.protocolVersion === 4;
    if (v311 && !this.retainless && this.retainProbe === 'unused') this.retainProbe = 'next';
    // Through a proxy the tunnel may be what closes (a proxy that says 200 and cannot reach the broker).
    const proxied = this.opts.proxy ? `; or the proxy (mqtt.proxy) closes the tunnel, as its log says: ${INSPECTION_FIX}` : '';
    this.opts.logger.warn(
      {
        broker: this.description,
        attempts: this.silentCloses,
        fix: `${
          v311
            ? "the broker's log says why: Mosquitto closes a connection so when it does not allow the agent's retained QoS 1 will (retain_available false, max_qos 0) or is at max_connections; the agent tries once without retain, and keeps to that if the broker takes it; with mqtt.protocolVersion: 5 the broker says which"
            : "the broker's log says why: Mosquitto closes a connection so when it is at max_connections"
        }${proxied}`,
      },
      'the broker ends the connection, or leaves it unanswered, before accepting it',
    );
  }

  /** A client made anew with what changed (TLS files, the keepalive, the will) takes this one's place. */
  private replaceClient(client: MqttClient): boolean {
    this.replaced.add(client);
    this.client = null;
    client.end(true);
    this.connect();
    return true;
  }

  /**
   * The wait after a connection the broker took away as soon as it gave it, or undefined for the
   * usual reconnect. A takeover (0x8E) waits at once: another client holds this client id and
   * reconnecting at once would only take it back. Without a reason (Mosquitto 2.0), ten such
   * connections in a row do: fewer would also slow down what the refusal guard finds by dropped
   * connections, which takes a handful. A close the guard put down to a refused publish is not
   * one of them: with max_queued_messages 0, Mosquitto 2.0 closes the connection at each refusal,
   * and a site whose ACL allows only the transactions costs a dozen such closes at start and one
   * per held class at each retry, none of which another connection would avoid.
   */
  private flapWait(now: number): number | undefined {
    const held = this.connectedAt === null ? null : now - this.connectedAt;
    const takenOver = this.serverDisconnect === SESSION_TAKEN_OVER;
    const forPublish = this.closeForPublish;
    this.connectedAt = null;
    this.serverDisconnect = null;
    this.closeForPublish = false;
    if (held === null) return undefined;
    if (held >= STABLE_MS) this.flaps = 0;
    if (forPublish && !takenOver) return undefined;
    if (!takenOver && held >= FLAP_MS) return undefined;
    this.flaps += 1;
    if (!takenOver && this.flaps < FLAPS_BEFORE_BACKOFF) return undefined;
    const wait = flapDelay(takenOver ? this.flaps : this.flaps - FLAPS_BEFORE_BACKOFF + 1, this.opts.random);
    this.opts.logger.warn(
      {
        broker: this.description,
        clientId: this.opts.clientId,
        flaps: this.flaps,
        retryInSeconds: Math.round(wait / 1000),
        fix: `${CLIENT_ID_FIX}${takenOver ? '' : "; or the broker drops this client for what it sends: the broker's log says which"}`,
      },
      takenOver ? 'another client connected with this client id and took the session over' : 'the broker keeps closing the connection as soon as it accepts it',
    );
    return wait;
  }

  firstAttempt(): Promise<void> {
    return this.attempted;
  }

  closedForPublish(): void {
    this.closeForPublish = true;
  }

  publish(topic: string, payload: string | Buffer, options: PublishOptions): Promise<void> {
    return new Promise((resolve, reject) => this.send(topic, payload, options, (err) => (err ? reject(err) : resolve())));
  }

  send(topic: string, payload: string | Buffer, options: PublishOptions, done: (err: BrokerError | null) => void): void {
    const client = this.client;
    if (!client?.connected) return done(new BrokerError('disconnected', 'not connected to the broker'));
    const props = options.correlationData && this.opts.protocolVersion === 5 ? { correlationData: options.correlationData } : undefined;
    // A broker that announced a Maximum Packet Size closes the connection on a larger packet
    // (Mosquitto's max_packet_size), which would take every other publish down with it: such a
    // packet is not sent, and fails with MQTT 5's "Packet too large".
    const limit = this.serverMaximumPacketSize;
    if (limit !== undefined && overPacketLimit(limit, topic, payload, options.qos, props ? 3 + props.correlationData.length : 0))
      return done(new BrokerError('invalid', `larger than the broker's maximum packet size (${limit} bytes)`, PACKET_TOO_LARGE));
    const retain = (options.retain ?? false) && !this.retainless;
    const opts = props ? { qos: options.qos, retain, properties: props } : (PLAIN[`${options.qos}-${retain}`] as IClientPublishOptions);
    let answered = false;
    try {
      client.publish(topic, payload, opts, (err) => {
        answered = true;
        this.settled(err, done);
      });
    } catch (err) {
      if (answered) throw err;
      // mqtt.js refused it before sending (a packet it cannot encode): the same each time.
      done(new BrokerError('invalid', errorMessage(err)));
    }
  }

  private settled(err: Error | undefined, done: (err: BrokerError | null) => void): void {
    if (!err) done(null);
    else if (err instanceof BrokerError) done(err);
    else if (typeof (err as { code?: unknown }).code === 'number') {
      const code = (err as unknown as { code: number }).code;
      done(new BrokerError('refused', `${errorMessage(err)} (reason code 0x${code.toString(16)})`, code));
    } else {
      // mqtt.js fails what it was sending when the connection goes ("Connection closed").
      done(new BrokerError('disconnected', errorMessage(err)));
    }
  }

  batch(fn: () => void): void {
    const stream = this.client?.stream as { cork?: () => void; uncork?: () => void } | undefined;
    stream?.cork?.();
    try {
      fn();
    } finally {
      process.nextTick(() => stream?.uncork?.());
    }
  }

  subscribe(filter: string, options: SubscribeOptions = {}): Promise<void> {
    const client = this.client;
    if (!client) return Promise.reject(new BrokerError('disconnected', 'not connected to the broker'));
    const rap = options.retainAsPublished === true && this.opts.protocolVersion === 5;
    return new Promise((resolve, reject) => {
      client.subscribe(filter, { qos: 1, ...(rap ? { rap: true } : {}) }, (err) => (err ? reject(err) : resolve()));
    });
  }

  /** Resolves on the broker's UNSUBACK, or after a second without one. */
  unsubscribe(filter: string): Promise<void> {
    const client = this.client;
    if (!client || !client.connected) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = this.opts.clock.setTimeout(resolve, 1_000);
      client.unsubscribe(filter, () => {
        timer.cancel();
        resolve();
      });
    });
  }

  receiveMaximum(): number {
    return this.serverReceiveMaximum;
  }

  maximumPacketSize(): number | undefined {
    return this.serverMaximumPacketSize;
  }

  end(timeoutMs: number): Promise<void> {
    const client = this.client;
    this.ending = true;
    this.reconnectTimer?.cancel();
    this.reconnectTimer = null;
    this.filesTimer?.cancel();
    this.filesTimer = null;
    this.client = null;
    if (!client) return Promise.resolve();
    return new Promise((resolve) => {
      let done = false;
      const finish = (): void => {
        if (done) return;
        done = true;
        timer.cancel();
        resolve();
      };
      const timer = this.opts.clock.setTimeout(() => client.end(true, finish), timeoutMs);
      client.end(false, finish);
    });
  }
}
