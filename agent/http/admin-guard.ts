import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { ClientAddress } from './client-address.js';

/** Wrong tokens from one address within a window before it is refused outright (429). */
const MAX_FAILURES = 10;
const WINDOW_MS = 60_000;
/** Addresses remembered at once; past it the oldest is forgotten (the bound holds in aggregate). */
const MAX_CLIENTS = 1_024;

export type AdminVerdict = { ok: true } | { ok: false; status: 401 | 403 | 429; retryAfterSeconds?: number };

/**
 * The status page's admin token: compared in constant time on its SHA-256, and rate-limited per
 * address, so a guesser gets 10 tries a minute instead of hundreds a second. A limited address is
 * answered 429 with Retry-After even with the right token until its window ends.
 */
export class AdminGuard {
  private readonly digest: Buffer | null;
  private readonly failures = new Map<string, { count: number; since: number }>();

  constructor(
    token: string | undefined,
    private readonly now: () => number,
    private readonly clientOf: ClientAddress = (req) => req.socket.remoteAddress ?? '?',
  ) {
    this.digest = token ? createHash('sha256').update(token).digest() : null;
  }

  get configured(): boolean {
    return this.digest !== null;
  }

  check(req: IncomingMessage): AdminVerdict {
    if (!this.digest) return { ok: false, status: 403 };
    const remote = this.clientOf(req);
    const now = this.now();
    const seen = this.failures.get(remote);
    if (seen && now - seen.since >= WINDOW_MS) this.failures.delete(remote);
    const current = this.failures.get(remote);
    if (current && current.count >= MAX_FAILURES) {
      return { ok: false, status: 429, retryAfterSeconds: Math.max(1, Math.ceil((current.since + WINDOW_MS - now) / 1000)) };
    }
    const header = req.headers.authorization ?? '';
    const given = header.startsWith('Bearer ') ? header.slice(7) : '';
    const ok = given.length > 0 && given.length <= 512 && timingSafeEqual(createHash('sha256').update(given).digest(), this.digest);
    if (ok) return { ok: true };
    if (current) current.count += 1;
    else {
      if (this.failures.size >= MAX_CLIENTS) this.failures.delete(this.failures.keys().next().value as string);
      this.failures.set(remote, { count: 1, since: now });
    }
    return { ok: false, status: 401 };
  }
}
