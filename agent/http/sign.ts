import { createHmac, timingSafeEqual } from 'node:crypto';

/** base64(HMAC-SHA256(body, secret)): the vendor's x-vendor-signature. */
export function signBody(body: Buffer | string, secret: string): string {
  return createHmac('sha256', secret).update(body).digest('base64');
}

const BASE64_SHA256 = /^[A-Za-z0-9+/]{43}=$/;

/**
 * Checks a signature header against the raw body in constant time. A missing header, one of the
 * wrong length or one that is not base64 is simply "not valid": it never throws.
 */
export function verifySignature(body: Buffer, header: string | string[] | undefined, secret: string): boolean {
  if (typeof header !== 'string') return false;
  const given = header.trim();
  if (!BASE64_SHA256.test(given)) return false;
  const expected = createHmac('sha256', secret).update(body).digest();
  const provided = Buffer.from(given, 'base64');
  return provided.length === expected.length && timingSafeEqual(provided, expected);
}
