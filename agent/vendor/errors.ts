import { AgentError } from '../platform/errors.js';

export type VendorErrorCode =
  | 'VENDOR_UNAUTHORIZED'
  | 'VENDOR_NOT_FOUND'
  | 'VENDOR_BAD_ENVELOPE'
  | 'VENDOR_TIMEOUT'
  | 'VENDOR_UNREACHABLE'
  | 'VENDOR_HTTP_ERROR'
  | 'VENDOR_REFUSED'
  | 'VENDOR_ABORTED';

export interface VendorErrorDetails {
  /** HTTP status when the vendor answered. */
  status?: number;
  /** True when the request may have reached the vendor and been acted on (matters for control). */
  ambiguous?: boolean;
  /** True when repeating an idempotent request may succeed. */
  retryable?: boolean;
  /** Server-requested wait (Retry-After), in ms. */
  retryAfterMs?: number;
}

export class VendorError extends AgentError {
  declare readonly code: VendorErrorCode;
  readonly status: number | undefined;
  readonly ambiguous: boolean;
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;

  constructor(code: VendorErrorCode, message: string, details: VendorErrorDetails = {}, cause?: unknown) {
    super(code, message, cause === undefined ? undefined : { cause });
    this.name = 'VendorError';
    this.status = details.status;
    this.ambiguous = details.ambiguous ?? false;
    this.retryable = details.retryable ?? false;
    this.retryAfterMs = details.retryAfterMs;
  }
}

export function isVendorError(err: unknown): err is VendorError {
  return err instanceof VendorError;
}
