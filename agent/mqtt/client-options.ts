import type { Logger } from '../platform/logger.js';
import mqtt, { MqttClient, type IClientOptions } from 'mqtt';
import { PacketStore } from './packet-store.js';
import { openTunnel, tlsInTunnel, TunnelAgent, TunnelStream, type TunnelTls } from './proxy-tunnel.js';
import { readTlsFile } from '../platform/tls-files.js';
import { trustSystemCaStore } from '../platform/system-trust.js';
import { decodeUserinfo } from '../platform/url-credentials.js';

/** How to reach the broker: what the agent and `doctor` share, so doctor tests what the agent does. */
export interface BrokerEndpoint {
  url: string;
  username?: string | undefined;
  password?: string | undefined;
  ca?: string | undefined;
  cert?: string | undefined;
  key?: string | undefined;
  rejectUnauthorized: boolean;
  protocolVersion: 4 | 5;
  /** The site's proxy (mqtt.proxy): every transport goes through a CONNECT tunnel or a SOCKS5 connection. */
  proxy?: string | undefined;
}

/**
 * mqtt.js options for an endpoint. The URL is read here (WHATWG URL), never by mqtt.js, which
 * would use Node's deprecated url.parse() and print a warning on every run. Credentials in the
 * URL count only where the endpoint gives none. Throws TLS_FILES_INVALID when a TLS file cannot be read.
 */
export function endpointOptions(e: BrokerEndpoint): IClientOptions {
  const url = new URL(e.url);
  const { protocol, hostname, port } = brokerAddress(e.url);
  const options: IClientOptions = {
    protocol,
    hostname,
    host: hostname,
    port,
    protocolVersion: e.protocolVersion,
    rejectUnauthorized: e.rejectUnauthorized,
  };
  // MQTT over WebSocket: the path the broker's web listener serves (Mosquitto takes any; EMQX,
  // HiveMQ and most proxies serve /mqtt). mqtt.js hands wss:// the TLS options below.
  if (protocol === 'ws' || protocol === 'wss') options.path = `${url.pathname}${url.search}`;
  const username = e.username ?? (url.username ? decodeUserinfo(url.username) : undefined);
  const password = e.password ?? (url.password ? decodeUserinfo(url.password) : undefined);
  if (username !== undefined) options.username = username;
  if (password !== undefined) options.password = password;
  if (e.ca) options.ca = readTlsFile(e.ca, 'mqtt.ca');
  if (e.cert) options.cert = readTlsFile(e.cert, 'mqtt.cert');
  if (e.key) options.key = readTlsFile(e.key, 'mqtt.key');
  return options;
}

/** Each scheme's port when the URL names none: MQTT's registered ports, and the web's. */
const DEFAULT_PORTS = { mqtt: 1883, mqtts: 8883, ws: 80, wss: 443 } as const;

/** Where mqtt.url points: its transport, host (IPv6 without brackets) and port. */
export function brokerAddress(mqttUrl: string): { protocol: keyof typeof DEFAULT_PORTS; hostname: string; port: number } {
  const url = new URL(mqttUrl);
  const protocol = url.protocol.slice(0, -1) as keyof typeof DEFAULT_PORTS;
  return { protocol, hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: url.port ? Number(url.port) : DEFAULT_PORTS[protocol] };
}

/** The largest packet the agent accepts from the broker (MQTT 5 tells the broker; it drops bigger ones). */
export const MAX_INCOMING_PACKET_BYTES = 256 * 1024;

export interface ClientSession {
  clientId: string;
  keepaliveSeconds?: number;
  connectTimeoutMs: number;
  /** The agent's will (bridge/state offline), retained unless the broker keeps nothing; doctor has none. */
  will?: { topic: string; payload: string; retain?: boolean } | undefined;
}

/**
 * The one way the agent and `doctor` make an mqtt.js client, so doctor connects as the agent does
 * (same endpoint reading, TLS files, protocol, packet limits). Reconnects are the caller's.
 */
export function connectClient(e: BrokerEndpoint, s: ClientSession, logger?: Pick<Logger, 'warn'>): MqttClient {
  if ((/^(mqtts|wss):/.test(e.url) && !e.ca) || e.proxy?.startsWith('https:')) trustSystemCaStore(logger);
  const options: IClientOptions = {
    ...endpointOptions(e),
    clientId: s.clientId,
    clean: true,
    keepalive: s.keepaliveSeconds ?? 60,
    reconnectPeriod: 0,
    connectTimeout: s.connectTimeoutMs,
    // Retained state is republished on every connect; nothing stale is queued while offline.
    queueQoSZero: false,
    // mqtt.js formats debug lines on every packet unless told it has no logger.
    log: () => undefined,
    // Not mqtt-packet's table of 65,536 two-byte buffers for packet ids: building it costs about
    // 15 ms at start on this machine and several MB of heap for as long as the agent runs.
    writeCache: false,
    // A PINGREQ every keepalive period, busy or not, rather than the ping timer cleared and set
    // again on every PUBACK (a microsecond each while a backlog flushes). A silent broker is
    // still noticed within 1.5 keepalive periods.
    reschedulePings: false,
    // Publishes awaiting PUBACK without mqtt.js's Map: see PacketStore.
    outgoingStore: new PacketStore(),
    ...(s.will ? { will: { topic: s.will.topic, payload: Buffer.from(s.will.payload), qos: 1 as const, retain: s.will.retain ?? true } } : {}),
    ...(e.protocolVersion === 5 ? { properties: { maximumPacketSize: MAX_INCOMING_PACKET_BYTES } } : {}),
  };
  return e.proxy ? throughProxy(e.proxy, options, s.connectTimeoutMs) : mqtt.connect(options);
}

/**
 * A client whose every connection (the first and each reconnect) is a new tunnel through the
 * proxy (CONNECT, or SOCKS5). mqtt.js takes an http.Agent for WebSocket; for TCP and TLS it takes
 * a stream builder, which is all mqtt.connect would add here (the options are read already).
 */
function throughProxy(proxy: string, options: IClientOptions, connectTimeoutMs: number): MqttClient {
  // The proxy must answer within half the connect timeout, so a silent one is said as such
  // before mqtt.js gives up on the connection without a word.
  const timeoutMs = Math.max(1000, Math.floor(connectTimeoutMs / 2));
  const protocol = options.protocol;
  const host = options.hostname ?? 'localhost';
  const port = options.port ?? 1883;
  if (protocol === 'ws' || protocol === 'wss') {
    return mqtt.connect({ ...options, wsOptions: { agent: new TunnelAgent(proxy, protocol === 'wss', timeoutMs) } });
  }
  const tls: TunnelTls = { rejectUnauthorized: options.rejectUnauthorized !== false };
  if (options.ca) tls.ca = options.ca;
  if (options.cert) tls.cert = options.cert;
  if (options.key) tls.key = options.key;
  const client = new MqttClient(() => {
    const tunnel = new TunnelStream(openTunnel({ proxy, host, port, timeoutMs }));
    return protocol === 'mqtts' ? tlsInTunnel(tunnel, host, tls) : tunnel;
  }, options);
  // As mqtt.connect does: an error with nobody listening yet must not throw.
  client.on('error', () => undefined);
  return client;
}
