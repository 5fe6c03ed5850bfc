import { describe, expect, it } from 'vitest';
import { memoryLogger } from '../helpers/memory-logger.js';

describe('log lines never carry a secret', () => {
  it('replaces values under secret keys at the top, nested, and in child bindings; leaves the rest and the caller\'s object alone', () => {
    const { logger, lines, raw } = memoryLogger('info');
    const vendor = { baseUrl: 'https://vendor.example', apiKey: 'k-123456' };
    const req = { headers: { authorization: 'Bearer t0ps3cret', 'x-vendor-signature': 'c2lnbmF0dXJl', host: 'box' } };
    logger.info({ apiKey: 'top-level-key', http: { adminToken: 'admin-tok-9' }, vendor, req, list: [{ password: 'pw-in-a-list' }], deep: { a: { channelSecret: 'cs-two-down' } } }, 'hello');
    logger.child({ component: 'x', secret: 'bound-secret' }).info({ transactionId: 'T1' }, 'child line');

    expect(raw.join('')).not.toMatch(/top-level-key|k-123456|t0ps3cret|c2lnbmF0dXJl|pw-in-a-list|cs-two-down|bound-secret|admin-tok-9/);
    const [first, second] = lines;
    expect(first).toMatchObject({
      apiKey: '[redacted]',
      vendor: { baseUrl: 'https://vendor.example', apiKey: '[redacted]' },
      req: { headers: { authorization: '[redacted]', 'x-vendor-signature': '[redacted]', host: 'box' } },
      list: [{ password: '[redacted]' }],
      deep: { a: { channelSecret: '[redacted]' } },
    });
    expect(second).toMatchObject({ component: 'x', secret: '[redacted]', transactionId: 'T1', msg: 'child line' });
    // The objects the caller passed still hold their values (copied where redacted, not changed).
    expect(vendor.apiKey).toBe('k-123456');
    expect(req.headers.authorization).toBe('Bearer t0ps3cret');
  });

  it('scrubs known secret values from any text, such as a library error message', () => {
    const { logger, raw } = memoryLogger('info', ['the-api-key-42']);
    logger.warn({ err: 'request to https://v.example/?key=the-api-key-42 failed' }, 'vendor unreachable');
    expect(raw.join('')).not.toContain('the-api-key-42');
    expect(raw.join('')).toContain('[redacted]');
  });
});
