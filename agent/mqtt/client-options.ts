import { readFileSync } from 'node:fs';
import type { IClientOptions } from 'mqtt';

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
}

/**
 * mqtt.js options for an endpoint. The URL is read here (WHATWG URL), never by mqtt.js, which
 * would use Node's deprecated url.parse() and print a warning on every run. Credentials in the
 * URL count only where the endpoint gives none. Throws when a certificate file cannot be read.
 */
export function endpointOptions(e: BrokerEndpoint): IClientOptions {
  const url = new URL(e.url);
  const secure = url.protocol === 'mqtts:';
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const options: IClientOptions = {
    protocol: secure ? 'mqtts' : 'mqtt',
    hostname,
    host: hostname,
    port: url.port ? Number(url.port) : secure ? 8883 : 1883,
    protocolVersion: e.protocolVersion,
    rejectUnauthorized: e.rejectUnauthorized,
  };
  const username = e.username ?? (url.username ? decodeURIComponent(url.username) : undefined);
  const password = e.password ?? (url.password ? decodeURIComponent(url.password) : undefined);
  if (username !== undefined) options.username = username;
  if (password !== undefined) options.password = password;
  if (e.ca) options.ca = readFileSync(e.ca);
  if (e.cert) options.cert = readFileSync(e.cert);
  if (e.key) options.key = readFileSync(e.key);
  return options;
}
