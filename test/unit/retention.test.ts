import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../agent/platform/clock.js';
import { PRUNE_BATCH, Retention } from '../../agent/store/retention.js';
import type { Scheduler } from '../../agent/time/scheduler.js';
import { Outbox } from '../../agent/store/outbox.js';
import { memoryLogger } from '../helpers/memory-logger.js';
import { asRecord, vendorRecord, storeAll } from '../helpers/records.js';

const manual: Scheduler = { schedule: () => ({ stop: () => undefined }) };

describe('retention', () => {
  it('prunes expired delivered records in batches that give the event loop back between them, never undelivered ones', async () => {
    const outbox = new Outbox({ path: join(mkdtempSync(join(tmpdir(), 'ret-')), 'agent.db') });
    outbox.open();
    const n = 2 * PRUNE_BATCH + 500;
    for (let i = 0; i < n; i += 1000) await storeAll(outbox, Array.from({ length: Math.min(1000, n - i) }, () => asRecord(vendorRecord())), 'poll', 0);
    await outbox.markDelivered(outbox.pending(0, n).map((r) => r.seq), 1_000); // long ago
    await storeAll(outbox, [asRecord(vendorRecord())], 'poll', 0); // undelivered, just as old
    const { logger, lines } = memoryLogger('info');
    const retention = new Retention({ outbox, scheduler: manual, clock: systemClock, logger, retentionDays: 30, firstDelayMs: 60_000 });
    retention.start();
    expect(outbox.stats().delivered).toBe(n); // nothing on the start path

    let turns = 0;
    let spinning = true;
    const spin = (): void => {
      turns++;
      if (spinning) setImmediate(spin);
    };
    setImmediate(spin);
    expect(await retention.prune()).toBe(n);
    spinning = false;
    expect(turns).toBeGreaterThanOrEqual(2); // the loop ran between the batches
    expect(outbox.stats()).toMatchObject({ pending: 1, delivered: 0 });
    expect(lines.find((l) => l.msg === 'pruned delivered transactions')).toMatchObject({ pruned: n });
    await retention.stop();
    outbox.close();
  });
});
