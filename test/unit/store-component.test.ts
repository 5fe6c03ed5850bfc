import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Health } from '../../agent/observe/health.js';
import { GroupCommit } from '../../agent/store/group-commit.js';
import { Outbox } from '../../agent/store/outbox.js';
import { StoreComponent } from '../../agent/store/store-component.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { memoryLogger } from '../helpers/memory-logger.js';
import { asRecord, vendorRecord } from '../helpers/records.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('StoreComponent: a database that cannot be opened', () => {
  it('starts without it, says why once, stores nothing meanwhile, and opens it at the next look once it can', async () => {
    const root = mkdtempSync(join(tmpdir(), 'store-component-'));
    dirs.push(root);
    // A disk not mounted yet: its directory is not there, so SQLite cannot create the file.
    const disk = join(root, 'usb-disk');
    const clock = new FakeClock();
    const health = new Health(clock);
    const { logger, lines } = memoryLogger();
    const outbox = new Outbox({ path: join(disk, 'agent.db') });
    const commits = new GroupCommit(outbox, 'webhook', clock);
    const store = new StoreComponent({ outbox, commits, health, clock, logger });

    store.start();
    expect(health.get('database')).toMatchObject({ ok: false, detail: expect.stringMatching(/^cannot open the database .*usb-disk\/agent\.db: .* \(storage\.path\)$/) });
    await expect(commits.add(asRecord(vendorRecord()))).rejects.toMatchObject({ code: 'STORE_FAILED' });
    await clock.advance(120_000);
    expect(lines.filter((l) => l.level === 'error').map((l) => l.msg)).toEqual(['cannot open the database; the agent runs without it (webhooks 503) and tries again every 30 s']);

    mkdirSync(disk);
    await clock.advance(30_000);
    expect(health.get('database')).toMatchObject({ ok: true, detail: 'writable' });
    expect(lines.some((l) => l.msg === 'database opened')).toBe(true);
    expect(await commits.add(asRecord(vendorRecord()))).toBe(true);
    await store.stop();
  });
});
