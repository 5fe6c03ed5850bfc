import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';

/**
 * An SD card as the kernel sees one: an ext4 file system in an image on a loop device, mounted
 * with errors=remount-ro as Debian mounts its root. `fail()` makes the kernel report an error on
 * it (ext4's trigger_fs_error), after which this kernel refuses every write, as it does when a
 * card wears out; `shutDown()` leaves it as older kernels do then. Needs root, a loop device,
 * mkfs.ext4 and e2fsck, and python3 for the shutdown ioctl.
 */
export class LoopCard {
  private replaced = 0;

  private constructor(
    private image: string,
    readonly mountPoint: string,
  ) {}

  static create(dir: string, sizeMb = 32): LoopCard {
    const image = join(dir, 'card.img');
    const mountPoint = join(dir, 'card');
    mkdirSync(mountPoint, { recursive: true });
    writeFileSync(image, '');
    run('truncate', ['-s', `${sizeMb}M`, image]);
    run('mkfs.ext4', ['-q', '-F', image]);
    const card = new LoopCard(image, mountPoint);
    card.mount();
    return card;
  }

  private mount(): void {
    run('mount', ['-o', 'loop,errors=remount-ro', this.image, this.mountPoint]);
  }

  /** The loop device under the mount (loop0...), as /sys/fs/ext4 names it. */
  device(): string {
    const line = readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .find((l) => l.split(' ')[4] === this.mountPoint);
    const source = line?.split(' - ')[1]?.split(' ')[1];
    if (!source) throw new Error(`${this.mountPoint} is not mounted`);
    return basename(source);
  }

  /** A disk error: the kernel makes the file system read-only. */
  fail(): void {
    writeFileSync(`/sys/fs/ext4/${this.device()}/trigger_fs_error`, 'chair-agent test: the card failed');
  }

  /**
   * The kernel shuts the file system down (ext4's shutdown ioctl, as xfs_io's `shutdown` makes
   * it): every access fails with EIO. This is what errors=remount-ro does on Linux 6.5 to 6.14,
   * Raspberry Pi OS's kernels, after a disk error; it is also how a pulled USB disk behaves.
   */
  shutDown(): void {
    // EXT4_IOC_SHUTDOWN = _IOR('X', 125, __u32); 2: EXT4_GOING_FLAGS_NOLOGFLUSH.
    const script = 'import fcntl, os, struct, sys\nfd = os.open(sys.argv[1], os.O_RDONLY)\nfcntl.ioctl(fd, 0x8004587D, struct.pack("I", 2))\nos.close(fd)';
    run('python3', ['-c', script, this.mountPoint]);
  }

  /**
   * What a reboot with the card repaired (or cloned to a new one) gives: unmounted, its image
   * copied, checked and mounted. A copy, not the same image: a mount namespace made meanwhile by
   * anything else on this machine (an `unshare --mount`, a chroot's tooling) holds its own copy of
   * the failed mount, so umount here leaves the kernel's file system alive and read-only, and
   * mounting the same image again would reuse its loop device and get that file system back.
   */
  replace(): void {
    run('umount', [this.mountPoint]);
    const failed = this.image;
    this.replaced += 1;
    this.image = failed.replace(/(-\d+)?\.img$/, `-${this.replaced}.img`);
    run('cp', ['--sparse=always', failed, this.image]);
    rmSync(failed, { force: true });
    const fsck = spawnSync('e2fsck', ['-f', '-y', this.image], { encoding: 'utf8' });
    // 1: errors corrected (the error this card was made to report).
    if (fsck.status !== 0 && fsck.status !== 1) throw new Error(`e2fsck: ${fsck.status} ${fsck.stdout}${fsck.stderr}`);
    this.mount();
  }

  remove(): void {
    spawnSync('umount', [this.mountPoint]);
    if (existsSync(this.image)) rmSync(this.image, { force: true });
  }
}

function run(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.error?.message ?? ''}${r.stderr}`);
}

/** Whether a LoopCard can be made here: root, a loop device, mkfs.ext4 and ext4's error trigger. */
export function loopCardWorks(): boolean {
  if (process.getuid?.() !== 0 || !existsSync('/dev/loop-control')) return false;
  const dir = mkdtempSync(join(tmpdir(), 'loop-probe-'));
  let card: LoopCard | null = null;
  try {
    card = LoopCard.create(dir, 8);
    return existsSync(`/sys/fs/ext4/${card.device()}/trigger_fs_error`);
  } catch {
    return false;
  } finally {
    card?.remove();
    rmSync(dir, { recursive: true, force: true });
  }
}
