/**
 * The port to the chair vendor's cloud (../shared/vendor-api.md). The core only ever sees these
 * parsed shapes; the HTTP details live in the adapter.
 */

/** One chair as the vendor reports it, after tolerant parsing. */
export interface ChairReading {
  deviceId: string;
  deviceCode: string | null;
  deviceName: string | null;
  location: string | null;
  /** The vendor's Status, verbatim (only "Available" is documented). */
  status: string;
  seated: boolean;
  leftMin: number | null;
  leftSec: number | null;
  /** The vendor's "YYYY-MM-DD HH:MM:SS", verbatim. */
  serverTime: string | null;
  firmwareVersion: string | null;
}

/**
 * A transaction record: `fields` holds every field of the vendor's record, names and values
 * verbatim; the rest are the few the agent needs, read out of it.
 */
export interface TransactionRecord {
  fields: Readonly<Record<string, unknown>>;
  transactionId: string;
  status: string;
  deviceId: string;
  transactionTime: string | null;
}

export interface TransactionQuery {
  from: string;
  to: string;
  limit: number;
  offset: number;
  order: string;
}

export interface CallOptions {
  /** Aborts the call (the agent is stopping). */
  signal?: AbortSignal;
  /** Overrides the client's retry count for an idempotent call. */
  retries?: number;
}

export interface ChairList {
  chairs: ChairReading[];
  /** Entries of the list that were not readable chairs, with why. */
  rejected: string[];
}

export interface VendorApi {
  /** The one request per poll cycle, whatever the number of chairs. */
  listChairs(options?: CallOptions): Promise<ChairList>;
  chairStatus(deviceId: string, options?: CallOptions): Promise<ChairReading>;
  listTransactions(query: TransactionQuery, options?: CallOptions): Promise<TransactionPage>;
  /** Starts a chair. Never retried: a failure may be ambiguous, see VendorError.ambiguous. */
  control(deviceId: string, minutes: number, options?: CallOptions): Promise<void>;
  close(): Promise<void>;
}

export interface TransactionPage {
  records: TransactionRecord[];
  /** Elements of the page that were not transaction records, with why. */
  rejected: { index: number; problem: string }[];
  /** How many elements the vendor returned, valid or not: paging stops on a short page. */
  size: number;
}
