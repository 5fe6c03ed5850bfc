/**
 * The outbound proxy the environment names for a URL, read as curl and apt read it: `https_proxy`
 * or `HTTPS_PROXY` for an https:// URL, `http_proxy` (or `HTTP_PROXY`) for an http:// one, and
 * `no_proxy` / `NO_PROXY` for the hosts that are reached directly (`*` for all; a name matches
 * itself and its subdomains, with or without a leading dot; a port after a name is ignored).
 * A proxy given without a scheme is an http:// one, as curl takes it.
 */
export interface EnvProxy {
  url: string;
  /** The variable it came from, to say where a proxy nobody wrote in the config came from. */
  variable: string;
}

export function proxyFromEnvironment(target: string, env: Readonly<Record<string, string | undefined>>): EnvProxy | undefined {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return undefined;
  }
  const names = url.protocol === 'https:' ? ['https_proxy', 'HTTPS_PROXY'] : url.protocol === 'http:' ? ['http_proxy', 'HTTP_PROXY'] : [];
  const variable = names.find((n) => (env[n] ?? '').trim() !== '');
  if (variable === undefined) return undefined;
  if (bypassed(url.hostname, env['no_proxy'] ?? env['NO_PROXY'] ?? '')) return undefined;
  const value = (env[variable] ?? '').trim();
  return { url: /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`, variable };
}

function bypassed(hostname: string, noProxy: string): boolean {
  const host = hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  for (const raw of noProxy.split(',')) {
    const entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    if (entry === '*') return true;
    // "host:port" and "[v6]:port": the host alone counts.
    const name = entry.startsWith('[') ? entry.slice(1, entry.indexOf(']')) : entry.includes(':') && entry.split(':').length === 2 ? entry.split(':')[0]! : entry;
    const bare = name.replace(/^\*?\./, '');
    if (host === bare || host.endsWith(`.${bare}`)) return true;
  }
  return false;
}
