import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';

/** Who a request is from, for the bounds kept per client (viewers, failed admin tokens). */
export type ClientAddress = (req: IncomingMessage) => string;

/**
 * The client's address. Behind the site's reverse proxy (nginx in front of the status page)
 * every request comes from the proxy's address, so the bounds kept per client would count every
 * viewer as one. From a proxy in http.trustedProxies, X-Forwarded-For is read from its right:
 * the first address there that is not a trusted proxy is the client, as fastify's trustProxy and
 * proxy-addr take it. From anyone else the header is ignored, so it cannot be used to pose as many.
 */
export function clientAddressFrom(trusted: readonly string[]): ClientAddress {
  if (trusted.length === 0) return (req) => req.socket.remoteAddress ?? '?';
  const list = trustedList(trusted);
  const isTrusted = (address: string): boolean => {
    const bare = address.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/, '$1');
    const family = isIP(bare);
    return family !== 0 && list.check(bare, family === 6 ? 'ipv6' : 'ipv4');
  };
  return (req) => {
    const peer = req.socket.remoteAddress ?? '?';
    if (!isTrusted(peer)) return peer;
    const header = req.headers['x-forwarded-for'];
    const hops = (Array.isArray(header) ? header.join(',') : (header ?? '')).split(',').map((h) => h.trim()).filter((h) => h !== '');
    let client = peer;
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i] as string;
      // A hop that is not an address ends the walk at the last one known.
      if (isIP(hop.replace(/^::ffff:/, '')) === 0) break;
      client = hop;
      if (!isTrusted(hop)) break;
    }
    return client;
  };
}

/** Addresses and CIDR ranges (192.168.1.5, 10.0.0.0/8, ::1), as http.trustedProxies holds them. */
function trustedList(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const [address = '', prefix] = entry.split('/');
    const type = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    if (prefix === undefined) list.addAddress(address, type);
    else list.addSubnet(address, Number(prefix), type);
  }
  return list;
}

/** Whether an http.trustedProxies entry is an address or a CIDR range; for the config schema. */
export function isAddressOrRange(entry: string): boolean {
  const [address = '', prefix, extra] = entry.split('/');
  const family = isIP(address);
  if (family === 0 || extra !== undefined) return false;
  if (prefix === undefined) return true;
  const bits = Number(prefix);
  return /^\d+$/.test(prefix) && bits >= 0 && bits <= (family === 6 ? 128 : 32);
}
