import { readFileSync } from 'node:fs';
// A namespace, not named imports: main.ts loads this module on any Node.js, also one too old for
// these functions, before it hands over to the pinned runtime.
import * as tls from 'node:tls';

/**
 * Trusts the box's own CA store besides Node's bundled list: Debian's
 * /etc/ssl/certs/ca-certificates.crt, where `update-ca-certificates` puts a CA from
 * /usr/local/share/ca-certificates (the CA of a site proxy that inspects TLS, or of a chain's
 * central broker). curl, apt and Debian's own Node.js trust that store; the runtime the package
 * carries trusted only its bundled list, so a box its IT had set up as usual reached everything
 * but the vendor, and with it lost its buttons. The union is what Node's own --use-system-ca
 * trusts: the store also holds roots Mozilla has since dropped from Node's list, which Debian's
 * ca-certificates updates keep or remove.
 *
 * Made before the first TLS connection, not at start: it costs about 16 ms and 2 MB of RssAnon
 * here (the store's certificates parsed and held), which a box on plain HTTP (the simulator,
 * the demo) never pays. The bundle file alone is read, not also the directory of hashed links
 * beside it, which hold the same certificates again and took twice the time and three times the
 * memory (Node's `getCACertificates('system')`). Once per process, and process-wide: every TLS
 * client that brings no CA of its own (the vendor's, the broker's without mqtt.ca, their
 * proxies') uses the default list, so a CA added later is trusted after a restart.
 */
let storeFile: string | null = null;
let trusted = false;

/** Where the store is: OpenSSL's SSL_CERT_FILE when set, as curl and OpenSSL read it (main.ts). */
export function useSystemCaStore(env: NodeJS.ProcessEnv): void {
  storeFile = env['SSL_CERT_FILE'] || '/etc/ssl/certs/ca-certificates.crt';
}

export function trustSystemCaStore(): void {
  if (trusted || storeFile === null) return;
  trusted = true;
  // Node.js 22.19 and 24.5 have both; on an older runtime the bundled list stays, as before.
  if (typeof tls.getCACertificates !== 'function' || typeof tls.setDefaultCACertificates !== 'function') return;
  let text: string;
  try {
    text = readFileSync(storeFile, 'utf8');
  } catch {
    return; // No store on this box (no ca-certificates): Node's own list, as before.
  }
  const defaults = tls.getCACertificates('default');
  const seen = new Set(defaults.map(pemKey));
  const added = (text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).filter((pem) => {
    const key = pemKey(pem);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  if (added.length === 0) return;
  try {
    tls.setDefaultCACertificates([...defaults, ...added]);
  } catch {
    // A certificate OpenSSL cannot read: the whole list is refused, and Node's own stays.
  }
}

function pemKey(pem: string): string {
  return pem.replace(/\s+/g, '');
}
