import type { IncomingMessage } from 'node:http';
import { expect, it } from 'vitest';
import { clientAddressFrom, isAddressOrRange } from '../../agent/http/client-address.js';

const req = (peer: string, forwarded?: string): IncomingMessage => ({ socket: { remoteAddress: peer }, headers: forwarded === undefined ? {} : { 'x-forwarded-for': forwarded } }) as unknown as IncomingMessage;

it('without trusted proxies, the peer is the client whatever X-Forwarded-For says', () => {
  const of = clientAddressFrom([]);
  expect(of(req('192.168.1.20', '10.9.9.9'))).toBe('192.168.1.20');
});

it('from a trusted proxy, the rightmost address that is not a trusted proxy is the client', () => {
  const of = clientAddressFrom(['192.168.1.5', '10.0.0.0/8']);
  expect(of(req('192.168.1.5', '192.168.1.77'))).toBe('192.168.1.77');
  // A client that sends its own header cannot choose its address: the proxy appended the real one.
  expect(of(req('192.168.1.5', '6.6.6.6, 192.168.1.77'))).toBe('192.168.1.77');
  // Two proxies in a row (10.x in the range), then the client.
  expect(of(req('::ffff:192.168.1.5', '192.168.1.77, 10.1.2.3'))).toBe('192.168.1.77');
  // No header, or one that is not an address: the proxy itself, or the last address known.
  expect(of(req('192.168.1.5'))).toBe('192.168.1.5');
  expect(of(req('192.168.1.5', 'unknown, 192.168.1.77'))).toBe('192.168.1.77');
  expect(of(req('192.168.1.5', 'garbage'))).toBe('192.168.1.5');
});

it('from anyone else, the header is ignored', () => {
  const of = clientAddressFrom(['192.168.1.5']);
  expect(of(req('192.168.1.66', '192.168.1.77'))).toBe('192.168.1.66');
});

it('the config accepts addresses and CIDR ranges only', () => {
  for (const ok of ['192.168.1.5', '10.0.0.0/8', '::1', 'fd00::/8']) expect(isAddressOrRange(ok)).toBe(true);
  for (const bad of ['nginx.lan', '10.0.0.0/33', '::1/129', '10.0.0.0/8/1', '10.0.0.0/x', '']) expect(isAddressOrRange(bad)).toBe(false);
});
