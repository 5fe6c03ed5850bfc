import { crc32 } from 'node:zlib';

// The outbox's rows as the rest of the agent sees them. Read queries select into these shapes
// (column aliases), so a row is typed where it is read, not cast where it is used.

export type RecordSource = 'webhook' | 'poll';

export interface StoredRecord {
  seq: number;
  transactionId: string;
  status: string;
  deviceId: string;
  /** The vendor's record as JSON text, fields verbatim. */
  record: string;
  source: RecordSource;
  receivedAt: number;
  /** CRC-32 of `record` when it was stored (null for rows stored before checksums). */
  crc: number | null;
  /** The start request this record was tied to (POS correlation), as JSON text, if any. */
  startRequest?: string | null;
}

/** The columns of a StoredRecord, aliased to its fields. */
export const RECORD_COLUMNS =
  'seq, transaction_id AS transactionId, status, device_id AS deviceId, record, source, received_at AS receivedAt, record_crc AS crc, start_request AS startRequest';

/**
 * A record to store, as the outbox prepares it on the event loop: a StoredRecord before it has a
 * seq, whose checksum is always made and whose start request is always said (null: none).
 */
export interface CommitRow extends Omit<StoredRecord, 'seq' | 'crc' | 'startRequest'> {
  crc: number;
  startRequest: string | null;
}

/** Which stored records to give again (bridge request `resend`): a seq range and/or a time range of receipt. */
export interface RecordRange {
  fromSeq?: number | undefined;
  toSeq?: number | undefined;
  /** Epoch ms, received at or after. */
  from?: number | undefined;
  /** Epoch ms, received at or before. */
  to?: number | undefined;
}

export interface ParkedRecord {
  seq: number;
  transactionId: string;
  status: string;
  deviceId: string;
  parkedAt: number;
  reason: string;
  parkCount: number;
  retryAt: number;
}

export const PARKED_COLUMNS =
  'seq, transaction_id AS transactionId, status, device_id AS deviceId, parked_at AS parkedAt, park_reason AS reason, park_count AS parkCount, retry_at AS retryAt';

/** Whether a stored record's text is what was stored: its checksum, or (older rows) that it is a JSON object. */
export function recordIntact(rec: StoredRecord): boolean {
  if (rec.crc !== null && rec.crc !== undefined) return crc32(rec.record) === rec.crc;
  try {
    const v: unknown = JSON.parse(rec.record);
    return typeof v === 'object' && v !== null && !Array.isArray(v);
  } catch {
    return false;
  }
}
