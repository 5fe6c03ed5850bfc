/**
 * The user:password@ of a URL (mqtt.url, mqtt.proxy, vendor.proxy), decoded as curl decodes it:
 * a % followed by two hex digits is that byte, any other % is itself. A password written as the
 * site's IT gave it ("50%off") then works here as it does in `curl -x` and `curl -u`;
 * decodeURIComponent threw on it at every connection, and a check that refused it would stop a
 * running agent at its next upgrade. %25 still means %.
 */
export function decodeUserinfo(s: string): string {
  if (!s.includes('%')) return s;
  const bytes: number[] = [];
  for (let i = 0; i < s.length; ) {
    if (s[i] === '%' && /^[0-9a-fA-F]{2}$/.test(s.slice(i + 1, i + 3))) {
      bytes.push(Number.parseInt(s.slice(i + 1, i + 3), 16));
      i += 3;
    } else {
      const ch = String.fromCodePoint(s.codePointAt(i) ?? 0);
      bytes.push(...Buffer.from(ch));
      i += ch.length;
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

export interface UrlCredentials {
  username: string;
  password: string;
}

/** The decoded user and password of a URL, or null when it has neither. */
export function urlCredentials(url: URL): UrlCredentials | null {
  if (!url.username && !url.password) return null;
  return { username: decodeUserinfo(url.username), password: decodeUserinfo(url.password) };
}

/** Basic credentials for a proxy (Proxy-Authorization), as curl sends `-x http://user:password@`. */
export function basicAuthorization(c: UrlCredentials): string {
  return `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`;
}

/** The URL without its user:password@ (the credentials then travel on their own). */
export function withoutCredentials(url: URL): URL {
  const bare = new URL(url.href);
  bare.username = '';
  bare.password = '';
  return bare;
}
