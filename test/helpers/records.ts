import type { TransactionRecord } from '../../agent/vendor/vendor-api.js';

let n = 0;

/** A transaction record as the vendor sends it. */
export function vendorRecord(over: Record<string, unknown> = {}): Record<string, unknown> {
  n += 1;
  return {
    TransactionId: `T${process.pid}-${n}`,
    TransactionCode: `C01-${n}`,
    TransactionTime: '2026-11-22 14:00:00',
    Location: 'Ladprao Mall',
    Status: 'playing',
    Amount: '100.00',
    PlayTime: '5',
    MassageChair: 'C01',
    Label: null,
    DeviceId: 'MC7001',
    PaymentMethod: 'promptpay',
    PaymentReference: `PP${n}`,
    ...over,
  };
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
