import { X509Certificate } from 'node:crypto';
import { readdirSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
// A namespace, not named imports: main.ts loads this module on any Node.js, also one too old for
// these functions, before it hands over to the pinned runtime.
import * as tls from 'node:tls';
import type { Logger } from './logger.js';

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
let problem: CaStoreProblem | null = null;
let told = false;

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;
/** Bytes no PEM text holds: what a DER certificate (Windows' .cer renamed .crt) brings into the bundle. */
// eslint-disable-next-line no-control-regex -- control bytes are what is looked for
const BINARY = /[\x00-\x08\x0e-\x1f\x7f\ufffd]/;

/**
 * What in the store OpenSSL cannot read, and the files it came from where the store's links name
 * them. Debian's update-ca-certificates copies every .crt into the bundle unread, and curl and
 * Python then refuse the whole bundle.
 */
export interface CaStoreProblem {
  store: string;
  /** PEM certificates that cannot be parsed: a line lost when one was pasted from an e-mail. */
  broken: number;
  /** Binary bytes between them: a DER certificate. */
  notPem: boolean;
  files: string[];
}

/** Where the store is: OpenSSL's SSL_CERT_FILE when set, as curl and OpenSSL read it (main.ts). */
export function useSystemCaStore(env: NodeJS.ProcessEnv): void {
  storeFile = env['SSL_CERT_FILE'] || '/etc/ssl/certs/ca-certificates.crt';
}

/** What was wrong with the store when it was read (doctor says it); null when nothing was. */
export function caStoreProblem(): CaStoreProblem | null {
  return problem;
}

/**
 * Reads the store once. The first caller with a logger says what was wrong with it, once: that
 * caller may be the vendor's client or the broker's, whichever makes the first TLS connection.
 */
export function trustSystemCaStore(logger?: Pick<Logger, 'warn'>): void {
  if (!trusted && storeFile !== null) {
    trusted = true;
    problem = readStore(storeFile);
  }
  if (logger && problem && !told) {
    told = true;
    logger.warn({ store: problem.store, unreadable: problem.broken, notPem: problem.notPem, files: problem.files }, `the box's CA store ${caStoreDetail(problem)}`);
  }
}

/** What was wrong, for the log line ("the box's CA store ...") and doctor's CA store line. */
export function caStoreDetail(p: CaStoreProblem): string {
  const what = [p.broken > 0 ? `${p.broken} certificate(s) that cannot be read` : '', p.notPem ? 'a file that is not PEM text (a DER certificate?)' : ''].filter(Boolean).join(' and ');
  const from = p.files.length > 0 ? ` (from ${p.files.join(', ')})` : '';
  return `${p.store} holds ${what}${from}: the agent trusts the rest; curl and Python refuse the whole file`;
}

function readStore(file: string): CaStoreProblem | null {
  // Node.js 22.19 and 24.5 have both; on an older runtime the bundled list stays, as before.
  if (typeof tls.getCACertificates !== 'function' || typeof tls.setDefaultCACertificates !== 'function') return null;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return null; // No store on this box (no ca-certificates): Node's own list, as before.
  }
  const defaults = tls.getCACertificates('default');
  const seen = new Set(defaults.map(pemKey));
  const added = (text.match(PEM_CERTIFICATE) ?? []).filter((pem) => {
    const key = pemKey(pem);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  // A binary file is left out by the match above, but it is said: its CA is trusted by nothing.
  const notPem = BINARY.test(text);
  let broken: string[] = [];
  if (added.length > 0) {
    try {
      tls.setDefaultCACertificates([...defaults, ...added]);
    } catch {
      // One certificate OpenSSL cannot read refuses the whole list, the site's CA with it. Each is
      // parsed only on this path, so a sound store costs nothing more.
      broken = added.filter((pem) => !readable(pem));
      try {
        tls.setDefaultCACertificates([...defaults, ...added.filter((pem) => !broken.includes(pem))]);
      } catch {
        return null; // Refused for a reason no single certificate shows: Node's own list stays.
      }
    }
  }
  if (broken.length === 0 && !notPem) return null;
  return { store: file, broken: broken.length, notPem, files: sourcesOf(file, broken.map(pemKey), notPem) };
}

function readable(pem: string): boolean {
  try {
    new X509Certificate(pem);
    return true;
  } catch {
    return false;
  }
}

/**
 * The files the bad entries came from: update-ca-certificates links each beside the bundle as
 * <name>.pem, to /usr/local/share/ca-certificates/<name>.crt for a site's own.
 */
function sourcesOf(file: string, brokenKeys: readonly string[], notPem: boolean): string[] {
  const dir = dirname(file);
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.pem'));
  } catch {
    return [];
  }
  const found: string[] = [];
  for (const name of names) {
    try {
      const path = join(dir, name);
      const content = readFileSync(path, 'utf8');
      const key = pemKey(content);
      if ((notPem && BINARY.test(content)) || brokenKeys.some((k) => key.includes(k))) found.push(realpathSync(path));
    } catch {
      // A dangling link: not what the bundle was made from.
    }
  }
  return found;
}

function pemKey(pem: string): string {
  return pem.replace(/\s+/g, '');
}
