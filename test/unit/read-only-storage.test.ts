import { mkdirSync, mkdtempSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseMountinfo, readOnlyStorage } from '../../agent/store/read-only-storage.js';

/** Lines as /proc/self/mountinfo writes them, with `card` mounted at `at`. */
function mountinfo(at: string, mountOptions: string, superOptions: string): () => string {
  return () =>
    [
      '22 1 259:2 / / rw,noatime shared:1 - ext4 /dev/mmcblk0p2 rw',
      `43 22 7:0 / ${at.replace(/ /g, '\\040')} ${mountOptions} shared:7 - ext4 /dev/sda1 ${superOptions}`,
      '',
    ].join('\n');
}

describe('the file system under the database', () => {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'ro-')));
  const card = join(root, 'chair data');
  mkdirSync(card);
  const db = join(card, 'agent.db');

  it('reads mountinfo(5) lines, optional fields and escaped spaces included', () => {
    expect(parseMountinfo(mountinfo(card, 'rw,relatime', 'rw,errors=remount-ro')())).toEqual([
      { mountPoint: '/', mountOptions: ['rw', 'noatime'], superOptions: ['rw'] },
      { mountPoint: card, mountOptions: ['rw', 'relatime'], superOptions: ['rw', 'errors=remount-ro'] },
    ]);
  });

  it('is writable when its mount and its superblock are', () => {
    expect(readOnlyStorage(db, mountinfo(card, 'rw,relatime', 'rw,errors=remount-ro'))).toBeNull();
  });

  it('names a file system the kernel stopped after a disk error, both as kernels 6.15 and later say it and as older ones do', () => {
    const emergency = readOnlyStorage(db, mountinfo(card, 'rw,relatime', 'rw,errors=remount-ro,emergency_ro'));
    expect(emergency).toMatchObject({ mountPoint: card, cause: 'disk error', summary: expect.stringContaining('after a disk error') });
    expect(emergency?.advice).toContain('replace the card');
    expect(readOnlyStorage(db, mountinfo(card, 'rw,relatime', 'ro,errors=remount-ro'))).toMatchObject({ cause: 'disk error' });
  });

  it('tells a read-only mount from a read-only view of a writable one (a sandbox, a bind mount)', () => {
    expect(readOnlyStorage(db, mountinfo(card, 'ro,relatime', 'ro'))).toMatchObject({ cause: 'mounted' });
    expect(readOnlyStorage(db, mountinfo(card, 'ro,relatime', 'rw'))).toMatchObject({ cause: 'view', advice: expect.stringContaining(`ReadWritePaths=${card}`) });
  });

  it('looks at the deepest mount above the database, and of two at one place the one mounted last', () => {
    const over = (): string => `${mountinfo(card, 'rw', 'rw')()}44 22 7:1 / ${card.replace(/ /g, '\\040')} rw shared:8 - ext4 /dev/sdb1 rw,emergency_ro\n`;
    expect(readOnlyStorage(db, over)).toMatchObject({ cause: 'disk error' });
    expect(readOnlyStorage(join(root, 'agent.db'), mountinfo(card, 'ro', 'ro'))).toBeNull(); // beside the card, on /
  });

  it('asks about the nearest directory that exists for a database not created yet', () => {
    expect(readOnlyStorage(join(card, 'not', 'yet', 'agent.db'), mountinfo(card, 'ro', 'ro'))).toMatchObject({ mountPoint: card });
  });

  it('says nothing where it cannot know: in memory, or no mount table', () => {
    expect(readOnlyStorage(':memory:', mountinfo(card, 'ro', 'ro'))).toBeNull();
    expect(
      readOnlyStorage(db, () => {
        throw new Error('ENOENT');
      }),
    ).toBeNull();
  });
});
