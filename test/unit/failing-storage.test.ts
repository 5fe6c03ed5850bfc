import { mkdirSync, mkdtempSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { failingStorage, parseMountinfo, type StorageProbes } from '../../agent/store/failing-storage.js';

/** Lines as /proc/self/mountinfo writes them, with `card` mounted at `at`. */
function table(at: string, mountOptions: string, superOptions: string): string {
  return [
    '22 1 259:2 / / rw,noatime shared:1 - ext4 /dev/mmcblk0p2 rw',
    `43 22 7:0 / ${at.replace(/ /g, '\\040')} ${mountOptions} shared:7 - ext4 /dev/sda1 ${superOptions}`,
    '',
  ].join('\n');
}

/** The kernel as the agent asks it: that mount table, and what open(2) says of the file. */
function mountinfo(at: string, mountOptions: string, superOptions: string, openError?: string): StorageProbes {
  return {
    mountinfo: () => table(at, mountOptions, superOptions),
    open: () => {
      if (openError) throw Object.assign(new Error(`${openError}: open`), { code: openError });
    },
  };
}

describe('the file system under the database, as the kernel has it', () => {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'ro-')));
  const card = join(root, 'chair data');
  mkdirSync(card);
  const db = join(card, 'agent.db');

  it('reads mountinfo(5) lines, optional fields and escaped spaces included', () => {
    expect(parseMountinfo(table(card, 'rw,relatime', 'rw,errors=remount-ro'))).toEqual([
      { mountPoint: '/', mountOptions: ['rw', 'noatime'], superOptions: ['rw'] },
      { mountPoint: card, mountOptions: ['rw', 'relatime'], superOptions: ['rw', 'errors=remount-ro'] },
    ]);
  });

  it('is writable when its mount and its superblock are', () => {
    expect(failingStorage(db, mountinfo(card, 'rw,relatime', 'rw,errors=remount-ro'))).toBeNull();
  });

  it('names a file system the kernel stopped after a disk error, as kernels from 6.15 and before 6.5 say it', () => {
    const emergency = failingStorage(db, mountinfo(card, 'rw,relatime', 'rw,errors=remount-ro,emergency_ro'));
    expect(emergency).toMatchObject({ mountPoint: card, fault: 'stopped', summary: expect.stringContaining('went read-only: the kernel stopped writes to it after a disk error') });
    expect(emergency?.advice).toContain('replace the card');
    expect(failingStorage(db, mountinfo(card, 'rw,relatime', 'ro,errors=remount-ro'))).toMatchObject({ fault: 'stopped' });
  });

  it('names a file system that fails every access: shut down (6.15 and later say so), or as 6.5 to 6.14 leave one, a mount saying rw and EIO', () => {
    expect(failingStorage(db, mountinfo(card, 'rw,relatime', 'rw,errors=remount-ro,shutdown'))).toMatchObject({ fault: 'failed', summary: expect.stringContaining('fails every access (EIO)') });
    const pi = failingStorage(db, mountinfo(card, 'rw,relatime', 'rw,errors=remount-ro', 'EIO'));
    expect(pi).toMatchObject({ mountPoint: card, fault: 'failed' });
    expect(pi?.advice).toContain('buttons, LEDs and chair states go on');
    // A file that is not there, or not this user's, is no disk error.
    expect(failingStorage(db, mountinfo(card, 'rw', 'rw', 'ENOENT'))).toBeNull();
    expect(failingStorage(db, mountinfo(card, 'rw', 'rw', 'EACCES'))).toBeNull();
  });

  it('tells a read-only mount from a read-only view of a writable one (a sandbox, a bind mount)', () => {
    expect(failingStorage(db, mountinfo(card, 'ro,relatime', 'ro'))).toMatchObject({ fault: 'mounted' });
    expect(failingStorage(db, mountinfo(card, 'ro,relatime', 'rw'))).toMatchObject({ fault: 'view', advice: expect.stringContaining(`ReadWritePaths=${card}`) });
  });

  it('looks at the deepest mount above the database, and of two at one place the one mounted last', () => {
    const over = { ...mountinfo(card, 'rw', 'rw'), mountinfo: () => `${table(card, 'rw', 'rw')}44 22 7:1 / ${card.replace(/ /g, '\\040')} rw shared:8 - ext4 /dev/sdb1 rw,emergency_ro\n` };
    expect(failingStorage(db, over)).toMatchObject({ fault: 'stopped' });
    expect(failingStorage(join(root, 'agent.db'), mountinfo(card, 'ro', 'ro'))).toBeNull(); // beside the card, on /
  });

  it('asks about the nearest directory that exists for a database not created yet', () => {
    expect(failingStorage(join(card, 'not', 'yet', 'agent.db'), mountinfo(card, 'ro', 'ro'))).toMatchObject({ mountPoint: card });
  });

  it('says nothing where it cannot know: in memory, or no mount table', () => {
    expect(failingStorage(':memory:', mountinfo(card, 'ro', 'ro'))).toBeNull();
    const noTable = {
      mountinfo: () => {
        throw new Error('ENOENT');
      },
      open: () => undefined,
    };
    expect(failingStorage(db, noTable)).toBeNull();
  });
});
