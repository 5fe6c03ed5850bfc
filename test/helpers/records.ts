import { vendorFields } from '../../bench/lib/records.js';
import type { TransactionRecord } from '../../agent/vendor/vendor-api.js';
import type { Outbox, RecordSource } from '../../agent/store/outbox.js';

let n = 0;

/** A transaction record as the vendor sends it, with an id unique to this test process. */
export function vendorRecord(over: Record<string, unknown> = {}): Record<string, unknown> {
  n += 1;
  return vendorFields(`T${process.pid}-${n}`, n, { DeviceId: 'MC7001', ...over });
}

export function asRecord(fields: Record<string, unknown>): TransactionRecord {
  return {
    fields,
    transactionId: String(fields['TransactionId']),
    status: String(fields['Status']),
    deviceId: String(fields['DeviceId']),
    transactionTime: (fields['TransactionTime'] as string | undefined) ?? null,
  };
}

/** Stores records as the agent does (resolved once on disk); resolves to how many were new. */
export async function storeAll(outbox: Outbox, records: readonly TransactionRecord[], source: RecordSource, receivedAt: number): Promise<number> {
  return (await outbox.storeDurably(records, source, receivedAt)).filter(Boolean).length;
}
