import type { Logger } from './logger.js';
import { readFileSync, statSync } from 'node:fs';
import { trustSystemCaStore } from './system-trust.js';
import { createSecureContext, getCACertificates, rootCertificates, type SecureContext } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { AgentError, errorCode, errorMessage } from './errors.js';

/** The PEM files a listener serves TLS with: the certificate (with its chain) and its key. */
export interface TlsFiles {
  cert: string;
  key: string;
}

export interface TlsPair {
  cert: Buffer;
  key: Buffer;
  /** When the certificate stops being valid (ms since the epoch). */
  notAfter: number;
}

/**
 * Reads and checks a certificate and its key as a TLS server would use them: both readable, the
 * certificate PEM, the key the certificate's. Throws `TLS_FILES_INVALID` naming the config key.
 * An expired certificate is not an error here: the listener still serves it and says so.
 */
export function readTlsPair(files: TlsFiles, keys: { cert: string; key: string }): TlsPair {
  const cert = readTlsFile(files.cert, keys.cert);
  const key = readTlsFile(files.key, keys.key);
  let notAfter: number;
  try {
    notAfter = Date.parse(new X509Certificate(cert).validTo);
  } catch {
    throw new AgentError('TLS_FILES_INVALID', `${keys.cert}: ${files.cert} is not a PEM certificate`);
  }
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    // OpenSSL's own words, which never carry the key: "key values mismatch", "bad decrypt"...
    const reason = /mismatch/i.test(errorMessage(err))
      ? `does not belong to the certificate in ${files.cert}`
      : key.includes('ENCRYPTED')
        ? 'is encrypted: the agent starts unattended, so give it the key without a passphrase (openssl pkey -in KEY -out PLAIN)'
        : `is not a usable PEM private key (${errorMessage(err)})`;
    throw new AgentError('TLS_FILES_INVALID', `${keys.key}: ${files.key} ${reason}`);
  }
  return { cert, key, notAfter };
}

/** What changes when either file is replaced or rewritten: a renewal shows up here. */
export function tlsFilesSignature(files: TlsFiles): string {
  return filesSignature([files.cert, files.key]);
}

/** What changes when any of these files is replaced, rewritten, or given other permissions. */
export function filesSignature(paths: readonly (string | undefined)[]): string {
  const sig = (file: string | undefined): string => {
    if (file === undefined) return '';
    try {
      const s = statSync(file);
      // ctime too: a chmod or chown that makes the key readable changes nothing else.
      return `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
    } catch (err) {
      return errorCode(err) ?? 'error';
    }
  };
  return paths.map(sig).join('|');
}

/** A TLS file read whole, or TLS_FILES_INVALID naming its config key. */
export function readTlsFile(path: string, key: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new AgentError('TLS_FILES_INVALID', `${key}: cannot read ${path} (${errorCode(err) ?? errorMessage(err)})`);
  }
}

/**
 * What stops the broker's TLS files (mqtt.ca, mqtt.cert, mqtt.key) from being used now, one line
 * per problem: a file that cannot be read, and a client certificate and key that are not a pair.
 */
export function brokerTlsProblems(files: { ca?: string | undefined; cert?: string | undefined; key?: string | undefined }): string[] {
  const problems: string[] = [];
  const attempt = (read: () => unknown): void => {
    try {
      read();
    } catch (err) {
      problems.push(errorMessage(err));
    }
  };
  if (files.ca !== undefined) attempt(() => readTlsFile(files.ca as string, 'mqtt.ca'));
  const { cert, key } = files;
  if (cert !== undefined && key !== undefined) attempt(() => readTlsPair({ cert, key }, { cert: 'mqtt.cert', key: 'mqtt.key' }));
  return problems;
}

/** The PEM certificates in a CA file, or TLS_FILES_INVALID naming its config key (unreadable, or none in it). */
export function readCaBundle(path: string, key: string): string[] {
  const text = readTlsFile(path, key).toString('utf8');
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  for (const pem of blocks) {
    try {
      new X509Certificate(pem);
    } catch {
      throw new AgentError('TLS_FILES_INVALID', `${key}: ${path} holds a certificate that cannot be read`);
    }
  }
  if (blocks.length === 0) throw new AgentError('TLS_FILES_INVALID', `${key}: ${path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  return blocks;
}

/**
 * A TLS context that trusts these CAs as well as the ones Node trusts by default (its bundled
 * list, NODE_EXTRA_CA_CERTS and the box's own store): a `ca` option alone would replace them. Made once, as parsing
 * some hundred certificates at every new connection would cost milliseconds each on a Pi.
 */
export function contextTrusting(extra: readonly string[], logger?: Pick<Logger, 'warn'>): SecureContext {
  trustSystemCaStore(logger);
  const defaults = typeof getCACertificates === 'function' ? getCACertificates('default') : [...rootCertificates];
  return createSecureContext({ ca: [...defaults, ...extra] });
}

/**
 * OpenSSL's words for a chain that ends at a CA nobody trusts: what a private CA causes, or a
 * site proxy that inspects TLS (it presents its own certificate for the name asked for).
 */
export const UNTRUSTED_CHAIN_CODES: ReadonlySet<string> = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
]);
