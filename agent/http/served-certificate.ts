import type { Clock, Timer } from '../platform/clock.js';
import type { Logger } from '../platform/logger.js';
import { errorMessage } from '../platform/errors.js';
import { readTlsPair, tlsFilesSignature, type TlsFiles, type TlsPair } from '../platform/tls-files.js';

const DAY_MS = 86_400_000;
/** Warn this long before the certificate expires: a renewal (certbot's, say) has failed by then. */
const EXPIRY_WARNING_MS = 14 * DAY_MS;

export interface CertificateStatus {
  /** When the certificate served expires (ms since the epoch); null while none has loaded. */
  expiresAt: number | null;
  /** Why the files last failed to load, until a pair loads. */
  problem: string | null;
}

export interface ServedCertificateOptions {
  files: TlsFiles;
  /** The config keys that name the files, for messages. */
  keys: { cert: string; key: string };
  clock: Clock;
  logger: Logger;
  /** How often the files are looked at for a renewal. */
  checkMs?: number;
}

/**
 * The certificate a TLS listener serves, picked up again when its files change. A renewal
 * replaces the files in place (certbot's deploy hook, a fleet tool's copy) every few weeks; the
 * agent must serve the new one without a restart, which would cost every other part a start.
 * A file is looked at once a minute (a stat each; nothing is read until one changed), rather than
 * watched: a renewal replaces files by rename, or swaps the symlinks certbot's live/ directory
 * holds, and an inotify watch stays on the file replaced; and a reload signal would need every
 * site's renewal hook to send it. A pair that does not load (the key written before the
 * certificate, a mismatch) keeps the old one serving, with one warning per change, and is tried
 * again at the next change.
 */
export class ServedCertificate {
  private pair: TlsPair | null = null;
  private signature = '';
  private refusedSignature = '';
  private timer: Timer | null = null;
  private lastExpiryWarning = -Infinity;
  private problem: string | null = null;

  constructor(private readonly opts: ServedCertificateOptions) {}

  /**
   * Reads the pair the listener starts with; throws `TLS_FILES_INVALID`. After a failure the
   * files are still looked at (`start`), and a pair that loads goes to `apply`.
   */
  load(): TlsPair {
    this.signature = tlsFilesSignature(this.opts.files);
    try {
      this.pair = readTlsPair(this.opts.files, this.opts.keys);
    } catch (err) {
      this.problem = errorMessage(err);
      throw err;
    }
    this.warnIfExpiring();
    return this.pair;
  }

  /** Looks at the files from now on, handing a changed pair that loads to `apply`. */
  start(apply: (pair: TlsPair) => void): void {
    this.timer = this.opts.clock.setInterval(() => this.check(apply), this.opts.checkMs ?? 60_000);
  }

  stop(): void {
    this.timer?.cancel();
    this.timer = null;
  }

  status(): CertificateStatus {
    return { expiresAt: this.pair?.notAfter ?? null, problem: this.problem };
  }

  private check(apply: (pair: TlsPair) => void): void {
    const signature = tlsFilesSignature(this.opts.files);
    if (signature !== this.signature && signature !== this.refusedSignature) {
      try {
        const pair = readTlsPair(this.opts.files, this.opts.keys);
        apply(pair);
        this.pair = pair;
        this.signature = signature;
        this.refusedSignature = '';
        this.problem = null;
        this.lastExpiryWarning = -Infinity;
        this.opts.logger.info({ expires: new Date(pair.notAfter).toISOString() }, 'certificate reloaded');
      } catch (err) {
        this.refusedSignature = signature;
        this.problem = errorMessage(err);
        if (this.pair) this.opts.logger.warn({ err: this.problem }, 'new certificate files not loaded; still serving the previous certificate');
        else this.opts.logger.error({ err: this.problem }, 'certificate files still do not load');
      }
    }
    this.warnIfExpiring();
  }

  /** At most one warning a day while the certificate served is within two weeks of expiry. */
  private warnIfExpiring(): void {
    const notAfter = this.pair?.notAfter;
    if (notAfter === undefined) return;
    const left = notAfter - this.opts.clock.now();
    if (left > EXPIRY_WARNING_MS || this.opts.clock.monotonic() - this.lastExpiryWarning < DAY_MS) return;
    this.lastExpiryWarning = this.opts.clock.monotonic();
    const when = new Date(notAfter).toISOString();
    this.opts.logger.warn(
      { expires: when, file: this.opts.files.cert },
      left <= 0 ? `certificate expired at ${when}: clients that check it refuse the connection (${this.opts.keys.cert})` : `certificate expires in ${Math.ceil(left / DAY_MS)} days (${this.opts.keys.cert}): has its renewal run?`,
    );
  }
}
