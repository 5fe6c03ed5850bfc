/** A transaction record as the vendor sends it (every documented field), the i-th of a series. */
export function vendorFields(id: string, i: number, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    TransactionId: id,
    TransactionCode: `C01-${i}`,
    TransactionTime: '2026-11-22 14:00:00',
    Location: 'Ladprao Mall',
    Status: 'playing',
    Amount: '100.00',
    PlayTime: '5',
    MassageChair: 'C01',
    Label: null,
    DeviceId: `MC70${String(i % 4).padStart(2, '0')}`,
    PaymentMethod: 'promptpay',
    PaymentReference: `PP${i}`,
    ...over,
  };
}
