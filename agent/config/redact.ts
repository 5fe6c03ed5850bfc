export const MASK = '********';

/** A URL with any password replaced; safe to print and log. Unchanged when it holds none. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (!u.password) return url;
    u.password = MASK;
    return u.toString();
  } catch {
    return url;
  }
}

/** Any text with a URL password in it (scheme://user:password@host), the password masked. */
export function redactUrlsIn(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/[^\s/:@]*):[^\s/@]*@/gi, `$1:${MASK}@`);
}
