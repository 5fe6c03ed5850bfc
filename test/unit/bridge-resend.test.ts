import { describe, expect, it } from 'vitest';
import { bridgeApiHandlers, type BridgeApiDeps } from '../../agent/mqtt/bridge-api.js';
import { silentLogger } from '../../agent/platform/logger.js';
import { RequestError } from '../../agent/mqtt/bridge-requests.js';
import { Topics } from '../../agent/mqtt/topics.js';
import type { RecordRange, StoredRecord } from '../../agent/store/outbox.js';

const record = (seq: number): StoredRecord => ({
  seq,
  transactionId: `TX${seq}`,
  status: 'finished',
  deviceId: 'MC7001',
  record: `{"TransactionId":"TX${seq}","Status":"finished","DeviceId":"MC7001"}`,
  source: 'webhook',
  receivedAt: 1_795_000_000_000 + seq,
  crc: null,
});

/** An outbox of `n` records, counting how many rows each read returns; a broker whose PUBACKs wait for `release`. */
function deps(n: number): { d: BridgeApiDeps; reads: number[]; release: () => void; published: () => number } {
  const reads: number[] = [];
  let published = 0;
  let gate: () => void = () => undefined;
  let open = new Promise<void>((r) => (gate = r));
  const outbox = {
    range(q: RecordRange, limit: number): StoredRecord[] {
      const rows: StoredRecord[] = [];
      for (let seq = q.fromSeq ?? 1; seq <= Math.min(n, q.toSeq ?? n) && rows.length < limit; seq++) rows.push(record(seq));
      reads.push(rows.length);
      return rows;
    },
  };
  const broker = {
    connected: true,
    async publish(): Promise<void> {
      published += 1;
      await open;
    },
  };
  const d = { outbox, broker, topics: new Topics('chair-agent', 'site'), site: { siteId: 'site', timeZone: 'Asia/Bangkok' }, logger: silentLogger(), rootLogger: silentLogger() } as unknown as BridgeApiDeps;
  return {
    d,
    reads,
    published: () => published,
    release: () => {
      gate();
      open = Promise.resolve();
    },
  };
}

describe('bridge request resend, bounded in aggregate', () => {
  it('reads the database a page at a time, not the whole range', async () => {
    const { d, reads, release } = deps(2_000);
    release();
    const answer = await bridgeApiHandlers(d)['resend']?.({ fromSeq: 1 });
    expect(answer).toEqual({ records: 2_000, firstSeq: 1, lastSeq: 2_000, more: false });
    expect(Math.max(...reads)).toBeLessThanOrEqual(500);
  });

  it('runs one resend at a time, lets four wait, and refuses the rest as busy', async () => {
    const { d, release, published } = deps(100);
    const resend = bridgeApiHandlers(d)['resend'] as (p: Record<string, unknown>) => Promise<unknown>;
    const asked = Array.from({ length: 20 }, () => resend({ fromSeq: 1 }).then((a) => a, (e: unknown) => e));
    // Only the first is publishing: one window of 20 in flight for the whole agent.
    await new Promise((r) => setImmediate(r));
    expect(published()).toBe(20);
    release();
    const answers = await Promise.all(asked);
    const busy = answers.filter((a) => a instanceof RequestError && a.code === 'busy');
    expect(busy).toHaveLength(15);
    expect(answers.filter((a) => !(a instanceof RequestError))).toHaveLength(5);
  });
});
