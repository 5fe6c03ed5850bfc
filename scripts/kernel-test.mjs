#!/usr/bin/env node
// `npm run test:kernel`: the gpiod driver and `chair-agent gpio` against a real kernel's GPIO
// character device. Boots Debian 13's kernel under qemu (KVM where /dev/kvm can be used, TCG
// otherwise) with gpio-sim laying out lines named as on a Raspberry Pi 5, and runs
// test/kernel/in-vm.mjs there on the amd64 package's own runtime and app (dist/pkg, from
// `npm run package`): the listing, the pull-up, debounce under bounces, a held press, release on
// kill -9 and Ctrl-C, --blink read back from the lines, press -> start -> LED blinking with
// the agent and the vendor simulator, and the SD card failing under the agent (ext4 with
// errors=remount-ro on a loop device: this kernel shuts it down, so every access fails with EIO). Then it boots twice more with systemd as PID 1
// (test/kernel/systemd-check.sh, the package's unit as systemd runs it): on Debian 13's userland
// (systemd 257) and on Debian 12's (systemd 252, what Raspberry Pi OS Bookworm runs).
//
// `npm run test:kernel -- arm64` runs the same three boots on the Pi's CPU: Debian 13's arm64
// kernel on an emulated Cortex-A76 (a Pi 5's core; qemu's "virt" board, TCG), Debian 13 and 12
// arm64 roots and the arm64 package. There the addon the Pi runs drives a real kernel's lines, and
// the unit's system call filter is arm64's. Its roots are made with qemu user emulation
// (qemu-user-static, registered with binfmt_misc here if it is not yet). Boots can be named after
// the CPU (`-- arm64 gpio bookworm`): gpio, trixie and bookworm, all three by default. On arm64
// the GPIO boot runs on the Debian 12 root: Raspberry Pi OS Bookworm's userland, most site boxes'.
//
// Debian's kernels (12 and 13) are built without gpio-sim and without the IRQ simulator it needs,
// so both are built here as one out-of-tree module, from Debian 13's own linux-source, with its
// own compiler (for arm64, its cross compiler) and headers, in an amd64 Debian root made by
// mmdebstrap (scripts/debian-root.sh; cached in dist/kernel-test, or in
// CHAIR_AGENT_KERNEL_TEST_CACHE; brought up to date when older than a day).
// Needs root, mmdebstrap (and arch-test for arm64), qemu-system-x86 (qemu-system-arm for arm64),
// cpio, e2fsprogs and Debian's mirror the first time; about 2 minutes after. On arm64 each boot's
// root takes about 4 minutes the first time (under user emulation). Under TCG each systemd boot
// takes 6 to 8 minutes on a quiet 2-core VM, 10 to 13 beside the rest of CI.
import { spawnSync } from 'node:child_process';
import { chmodSync, closeSync, cpSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
// [amd64|arm64] [gpio] [trixie] [bookworm]: the CPU, then which boots (all three by default).
const [ARCH = 'amd64', ...named] = process.argv.slice(2);
const BOOTS = named.length > 0 ? named : ['gpio', 'trixie', 'bookworm'];
/** What differs between the CPUs: the emulator, its board and CPU, the console, the library path. */
const MACHINES = {
  amd64: { qemu: 'qemu-system-x86_64', qemuPackage: 'qemu-system-x86', board: [], tcgCpu: 'max', kvm: process.arch === 'x64', console: 'ttyS0', triplet: 'x86_64-linux-gnu' },
  // A Pi 5's Cortex-A76. Never KVM here: the host is not arm64.
  arm64: { qemu: 'qemu-system-aarch64', qemuPackage: 'qemu-system-arm', board: ['-M', 'virt'], tcgCpu: 'cortex-a76', kvm: process.arch === 'arm64', console: 'ttyAMA0', triplet: 'aarch64-linux-gnu' },
};
const MACHINE = MACHINES[ARCH];
const CACHE = process.env.CHAIR_AGENT_KERNEL_TEST_CACHE ?? join(ROOT, 'dist', 'kernel-test');
const FOREIGN = ARCH !== 'amd64';
// Where gpio-sim is built: Debian 13 amd64, and for a foreign CPU with Debian's cross compiler
// for it. The arm64 module built there is byte for byte the one built natively in an arm64 root
// under user emulation, which took 3 minutes and its root 9 to make, against seconds.
const BUILD_ROOT = join(CACHE, FOREIGN ? `trixie-cross-${ARCH}` : 'trixie');
// Debian 13's userland booted (systemd 257): the build root itself on amd64.
const TRIXIE_ROOT = join(CACHE, FOREIGN ? `trixie-${ARCH}` : 'trixie');
// Debian 12's userland (systemd 252, udev 252) on the same kernel: what Raspberry Pi OS Bookworm,
// the OS most site boxes run, gives the package's unit. No compiler: it only boots.
const BOOKWORM_ROOT = join(CACHE, FOREIGN ? `bookworm-${ARCH}` : 'bookworm');
// The GPIO boot's userland: on arm64 Debian 12's, as on most Pis at sites (and with it CI makes
// one arm64 root under emulation, not two); on amd64 the build root's.
const GPIO_ROOT = FOREIGN ? BOOKWORM_ROOT : BUILD_ROOT;
const CONSOLE = join(CACHE, FOREIGN ? `console-${ARCH}.log` : 'console.log');
const MIRROR = process.env.DEBIAN_MIRROR ?? 'http://deb.debian.org/debian';
const SECURITY_MIRROR = process.env.DEBIAN_SECURITY_MIRROR ?? 'http://deb.debian.org/debian-security';
const MAX_AGE_MIN = Number(process.env.CHAIR_AGENT_ROOT_MAX_AGE_MIN ?? 1440);
const started = Date.now();
const say = (t) => process.stderr.write(`kernel-test [${((Date.now() - started) / 1000).toFixed(0)} s]: ${t}\n`);

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...opts });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  if (r.status !== 0 && !opts.allowFail) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}):\n${`${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n').slice(-20).join('\n')}`);
  return r;
}
const inRoot = (dir, script) => run('chroot', [dir, 'sh', '-c', script], { env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', HOME: '/root', LANG: 'C.UTF-8', DEBIAN_FRONTEND: 'noninteractive' } });
const have = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;

/**
 * A Debian root of `suite` for `arch` (this CPU by default) with `packages`, cached in `dir`, with
 * the suite's security updates as an installed box has them. One older than a day is brought up
 * to date first: a root kept for weeks would boot last month's kernel and systemd.
 */
function cachedRoot(dir, suite, packages, arch = ARCH) {
  const ready = join(dir, '.ready');
  // Every root that boots has udev (the systemd check sees what Debian's rules make of a GPIO
  // chip); a cache from before it was added is made again. One from before ca-certificates was
  // added (the box's CA store) gets it now: made again, an arm64 root takes five minutes under
  // emulation. The cross build's root boots nothing.
  const boots = packages.includes('udev');
  if (existsSync(ready) && (!boots || existsSync(join(dir, 'usr', 'bin', 'udevadm')))) {
    const complete = !boots || existsSync(join(dir, 'usr', 'sbin', 'update-ca-certificates'));
    if (complete && Date.now() - statSync(ready).mtimeMs < MAX_AGE_MIN * 60_000) return;
    say(`bringing ${basename(dir)} up to date (apt-get dist-upgrade${complete ? '' : ', and ca-certificates'})`);
    try {
      upgrade(dir, suite, packages);
    } catch (err) {
      // A mirror that cannot be reached says nothing about the agent: the cached root still boots.
      say(`could not bring ${basename(dir)} up to date; booting it as it is (${err.message.split('\n')[0]})`);
    }
    return;
  }
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(CACHE, { recursive: true });
  say(`a Debian ${suite} ${arch} root with ${packages.join(', ')}, its updates included (once; cached in ${CACHE})`);
  // mmdebstrap through scripts/debian-root.sh: under qemu user emulation, debootstrap and then the
  // updates took 17.5 minutes for the arm64 build root, this 5.
  run('bash', [join(ROOT, 'scripts', 'debian-root.sh'), suite, arch, dir, ...packages], { env: { ...process.env, DEBIAN_MIRROR: MIRROR, DEBIAN_SECURITY_MIRROR: SECURITY_MIRROR } });
  prepare(dir);
  writeFileSync(join(dir, '.ready'), '');
}

/** The root brought up to date, with every one of `packages` (a cached root may predate one). */
function upgrade(dir, suite, packages) {
  writeFileSync(join(dir, 'etc', 'apt', 'sources.list'), `deb ${MIRROR} ${suite} main\ndeb ${MIRROR} ${suite}-updates main\ndeb ${SECURITY_MIRROR} ${suite}-security main\n`);
  prepare(dir);
  inRoot(dir, `apt-get update -qq && apt-get dist-upgrade -y -qq && apt-get install -y -qq --no-install-recommends ${packages.join(' ')} && apt-get autoremove -y -qq --purge && apt-get clean`);
  writeFileSync(join(dir, '.ready'), '');
}

/** What a root needs before apt runs in it: the host's resolver, and no initramfs made under emulation. */
function prepare(dir) {
  cpSync('/etc/resolv.conf', join(dir, 'etc', 'resolv.conf'));
  // The headers bring the kernel package, whose initramfs nothing boots (the VM's is made here):
  // under qemu user emulation, making it took most of four minutes at a kernel update. A new
  // kernel's hook creates one whatever the setting; an update honours the setting.
  const initramfsConf = join(dir, 'etc', 'initramfs-tools', 'update-initramfs.conf');
  if (existsSync(initramfsConf)) writeFileSync(initramfsConf, 'update_initramfs=no\n');
  rmSync(join(dir, 'etc', 'kernel', 'postinst.d', 'initramfs-tools'), { force: true });
}

const SYSTEM = ['kmod', 'iproute2', 'systemd', 'systemd-sysv', 'dbus', 'procps', 'udev', 'ca-certificates'];
/**
 * Debian 13 as it boots, with AppArmor, which a Debian 13 install has (its kernel package
 * recommends it), so the unit boots with the profiles loaded as on such a box.
 */
const TRIXIE = ['apparmor', ...SYSTEM];
/**
 * Where gpio-sim is built. On amd64, Debian 13 with its kernel headers, compiler and kmod, which
 * is booted too. For a foreign CPU, Debian 13 amd64 with the cross compiler, and apt knowing the
 * CPU's packages (its headers are unpacked at the build, kernelAndModule).
 */
const buildRoot = () => (FOREIGN
  ? cachedRoot(BUILD_ROOT, 'trixie', ['make', 'xz-utils', `gcc-${MACHINE.triplet}`], `amd64,${ARCH}`)
  : cachedRoot(BUILD_ROOT, 'trixie', ['make', 'gcc', 'libc6-dev', 'xz-utils', `linux-headers-${ARCH}`, ...TRIXIE]));
const trixieRoot = () => (FOREIGN ? cachedRoot(TRIXIE_ROOT, 'trixie', TRIXIE) : buildRoot());
/** Debian 12 as a site box has it: systemd and udev 252, Debian 12's kmod and util-linux. */
const bookwormRoot = () => cachedRoot(BOOKWORM_ROOT, 'bookworm', SYSTEM);

/** The kernel release of Debian 13's current headers, e.g. 6.12.117+deb13-amd64. */
function kernelRelease() {
  // Installed on amd64; a foreign CPU's as apt has them, for kernelAndModule to unpack.
  const depends = FOREIGN
    ? inRoot(BUILD_ROOT, `apt-cache show --no-all-versions linux-headers-${ARCH}:${ARCH} | sed -n 's/^Depends: //p'`).stdout
    : inRoot(BUILD_ROOT, `dpkg-query -W -f='\${Depends}' linux-headers-${ARCH}`).stdout;
  const release = /linux-headers-(\S+)/.exec(depends)?.[1];
  if (!release || (!FOREIGN && !existsSync(join(BUILD_ROOT, 'usr', 'src', `linux-headers-${release}`)))) throw new Error(`no linux-headers-*-${ARCH} in the build root (${depends})`);
  return release;
}

/**
 * A foreign CPU's headers for `release`, unpacked in the build root rather than installed: as
 * packages they depend on that CPU's compiler and kernel image, which apt would install as
 * foreign binaries to run under emulation. Their build tools (linux-kbuild, Multi-Arch: foreign)
 * are the host's own, installed; the headers' Makefile names the cross compiler.
 */
function foreignHeaders(release) {
  const depends = inRoot(BUILD_ROOT, `apt-cache show --no-all-versions linux-headers-${release}:${ARCH} | sed -n 's/^Depends: //p'`).stdout;
  const common = /linux-headers-[^\s,]+-common/.exec(depends)?.[0];
  const kbuild = /linux-kbuild-[^\s,]+/.exec(depends)?.[0];
  if (!common || !kbuild) throw new Error(`linux-headers-${release}:${ARCH} names no common headers or kbuild (${depends})`);
  inRoot(BUILD_ROOT, `apt-get install -y -qq --no-install-recommends ${kbuild} && cd /tmp && apt-get download -qq linux-headers-${release}:${ARCH} ${common} && rm -rf /usr/src/linux-headers-* && for deb in linux-headers-*.deb; do dpkg-deb -x "$deb" / || exit 1; done && rm linux-headers-*.deb`);
}

/**
 * A foreign CPU's binaries (the root's, for mmdebstrap and chroot) run through qemu user
 * emulation, registered with the F flag so that it works inside the chroot without a copy there.
 */
function foreignBinaries() {
  const name = { arm64: 'aarch64' }[ARCH];
  if (!have(`qemu-${name}-static`)) throw new Error(`qemu-${name}-static is missing (apt install qemu-user-static)`);
  if (!existsSync('/proc/sys/fs/binfmt_misc/register')) run('mount', ['-t', 'binfmt_misc', 'binfmt_misc', '/proc/sys/fs/binfmt_misc']);
  if (existsSync(`/proc/sys/fs/binfmt_misc/qemu-${name}`)) return;
  const magic = '\\x7f\\x45\\x4c\\x46\\x02\\x01\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02\\x00\\xb7\\x00';
  const mask = '\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\x00\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xfe\\xff\\xff\\xff';
  // binfmt_misc reads the \x escapes itself.
  writeFileSync('/proc/sys/fs/binfmt_misc/register', `:qemu-${name}:M::${magic}:${mask}:/usr/bin/qemu-${name}-static:F`);
}

/** The kernel image, its modules, and gpio-sim.ko built for it. Cached per kernel release. */
function kernelAndModule(release) {
  const out = join(CACHE, `kernel-${release}`);
  if (existsSync(join(out, 'gpio-sim.ko'))) return out;
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const series = release.split('.').slice(0, 2).join('.');
  say(`fetching linux-image-${release} and linux-source-${series}`);
  inRoot(BUILD_ROOT, `cd /tmp && rm -f *.deb && apt-get update -qq && apt-get download -qq linux-image-${release}:${ARCH} linux-source-${series}`);
  if (FOREIGN) foreignHeaders(release);
  const tmp = join(BUILD_ROOT, 'tmp');
  const image = readdirSync(tmp).find((f) => f.startsWith(`linux-image-${release}_`));
  const source = readdirSync(tmp).find((f) => f.startsWith(`linux-source-${series}_`));
  run('dpkg-deb', ['-x', join(tmp, image), join(out, 'image')]);
  say(`building gpio-sim and the IRQ simulator as one module, with Debian 13's ${FOREIGN ? 'cross ' : ''}compiler and headers`);
  const build = join(BUILD_ROOT, 'build');
  rmSync(build, { recursive: true, force: true });
  mkdirSync(build);
  inRoot(BUILD_ROOT, `cd /build && dpkg-deb --fsys-tarfile /tmp/${source} | tar -xO ./usr/src/linux-source-${series}.tar.xz | tar -xJ --strip-components=1 linux-source-${series}/drivers/gpio/gpio-sim.c linux-source-${series}/kernel/irq/irq_sim.c`);
  // The IRQ simulator is built into kernels that have it; a module cannot use irq_to_desc, which
  // is not exported, and generic_handle_irq does the same for a mapped interrupt.
  const irqSim = join(build, 'kernel', 'irq', 'irq_sim.c');
  writeFileSync(irqSim, readFileSync(irqSim, 'utf8').replace('handle_simple_irq(irq_to_desc(irqnum));', 'generic_handle_irq(irqnum);'));
  cpSync(join(build, 'drivers', 'gpio', 'gpio-sim.c'), join(build, 'gpio-sim-main.c'));
  cpSync(irqSim, join(build, 'irq_sim.c'));
  writeFileSync(join(build, 'Makefile'), 'obj-m := gpio-sim.o\ngpio-sim-y := gpio-sim-main.o irq_sim.o\n');
  inRoot(BUILD_ROOT, `cd /build && make -s -C /usr/src/linux-headers-${release} M=/build modules`);
  cpSync(join(build, 'gpio-sim.ko'), join(out, 'gpio-sim.ko'));
  rmSync(join(tmp, image));
  rmSync(join(tmp, source));
  // The kernels an upgraded root left behind.
  for (const old of readdirSync(CACHE).filter((d) => d.startsWith('kernel-') && d.endsWith(`-${ARCH}`) && d !== basename(out))) rmSync(join(CACHE, old), { recursive: true, force: true });
  return out;
}

/**
 * The VM's whole file system, as an initramfs: a Debian root (13's without the compiler, or 12's),
 * Debian 13's kernel modules with gpio-sim, the package, the test.
 */
function initramfs(release, kernel, mode, root) {
  // This build's, as package-check takes it: dist/pkg keeps the tarballs of earlier builds too.
  const version = JSON.parse(readFileSync(join(ROOT, 'dist', 'agent', 'build-info.json'), 'utf8')).version;
  const tarball = `chair-agent-${version}-linux-${ARCH}.tar.gz`;
  if (!existsSync(join(ROOT, 'dist', 'pkg', tarball))) throw new Error(`dist/pkg has no ${tarball} (this build's): npm run package -- ${ARCH}`);
  // One per CPU: CI boots amd64 and arm64 side by side.
  const stage = join(CACHE, `stage-${ARCH}`);
  rmSync(stage, { recursive: true, force: true });
  mkdirSync(stage);
  const excludes = ['./usr/share/perl', `./usr/lib/${MACHINE.triplet}/perl-base`, './usr/share/zoneinfo', './usr/share/i18n', './usr/share/info', './usr/src', './usr/lib/gcc', './usr/libexec/gcc', './usr/share/doc', './usr/share/man', './usr/share/locale', `./usr/lib/${MACHINE.triplet}/perl`, './var/cache/apt', './var/lib/apt/lists', './build', './tmp/*', './.ready',
    // The kernels the headers brought into the root (two after an upgrade): the VM boots the one
    // given to qemu, and its modules are laid out below.
    './boot', './usr/lib/modules'];
  run('sh', ['-c', `tar -C "${root}" ${excludes.map((e) => `--exclude='${e}'`).join(' ')} -cf - . | tar -C "${stage}" -xf -`]);
  const modules = join(stage, 'lib', 'modules', release);
  rmSync(modules, { recursive: true, force: true });
  mkdirSync(join(modules, 'kernel', 'fs', 'configfs'), { recursive: true });
  mkdirSync(join(modules, 'extra'));
  // Debian 12 and 13 have merged /usr: lib/modules is usr/lib/modules in the root, and in the package.
  const src = [join(kernel, 'image', 'usr', 'lib', 'modules', release), join(kernel, 'image', 'lib', 'modules', release)].find((d) => existsSync(d));
  if (!src) throw new Error(`no modules of ${release} in the kernel package`);
  for (const f of readdirSync(src).filter((f) => f.startsWith('modules.'))) cpSync(join(src, f), join(modules, f));
  const configfs = readdirSync(join(src, 'kernel', 'fs', 'configfs'))[0];
  cpSync(join(src, 'kernel', 'fs', 'configfs', configfs), join(modules, 'kernel', 'fs', 'configfs', configfs));
  cpSync(join(kernel, 'gpio-sim.ko'), join(modules, 'extra', 'gpio-sim.ko'));
  // ext4 on a loop device, for the failing SD card (in-vm.mjs, step 6), with what ext4 needs.
  for (const module of ['fs/ext4/ext4', 'fs/jbd2/jbd2', 'fs/mbcache', 'lib/crc16', 'lib/libcrc32c', 'crypto/crc32c_generic', 'drivers/block/loop']) {
    const from = join(src, 'kernel', dirname(module));
    const file = readdirSync(from).find((f) => f.startsWith(`${basename(module)}.ko`));
    if (!file) throw new Error(`no ${module} module in the kernel package`);
    mkdirSync(join(modules, 'kernel', dirname(module)), { recursive: true });
    cpSync(join(from, file), join(modules, 'kernel', dirname(module), file));
  }
  run('chroot', [stage, 'depmod', release]);
  run('tar', ['-xzf', join(ROOT, 'dist', 'pkg', tarball), '-C', join(stage, 'opt')]);
  mkdirSync(join(stage, 'test'));
  cpSync(join(ROOT, 'test', 'kernel', 'in-vm.mjs'), join(stage, 'test', 'in-vm.mjs'));
  // The SD card of step 6, made here: the VM's root has no mkfs.ext4.
  if (mode !== 'systemd') {
    run('truncate', ['-s', '8M', join(stage, 'test', 'card.img')]);
    run('mkfs.ext4', ['-q', '-F', join(stage, 'test', 'card.img')]);
  }
  cpSync(join(ROOT, 'test', 'kernel', 'init.sh'), join(stage, 'init'));
  chmodSync(join(stage, 'init'), 0o755);
  if (mode === 'systemd') {
    // systemd as PID 1, the check as a unit of multi-user.target, no login prompt on the console.
    cpSync(join(ROOT, 'test', 'kernel', 'systemd-check.sh'), join(stage, 'test', 'systemd-check.sh'));
    // A certificate for the webhook port's HTTPS steps, made here: the VM's root has no OpenSSL.
    // Thirty days: doctor fails one within two weeks of its expiry.
    if (have('openssl')) {
      run('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '30', '-subj', '/CN=127.0.0.1',
        '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(stage, 'test', 'webhook.key'), '-out', join(stage, 'test', 'webhook.crt')]);
    }
    const units = join(stage, 'etc', 'systemd', 'system');
    cpSync(join(ROOT, 'test', 'kernel', 'kernel-test.service'), join(units, 'kernel-test.service'));
    mkdirSync(join(units, 'multi-user.target.wants'), { recursive: true });
    symlinkSync('/etc/systemd/system/kernel-test.service', join(units, 'multi-user.target.wants', 'kernel-test.service'));
    for (const unit of [`serial-getty@${MACHINE.console}.service`, 'getty@tty1.service', 'systemd-timesyncd.service']) symlinkSync('/dev/null', join(units, unit));
    writeFileSync(join(stage, 'etc', 'machine-id'), '');
  }
  // Uncompressed: under TCG the kernel's gunzip of it took longer than the test.
  const image = join(CACHE, `initramfs-${mode}-${basename(root)}.cpio`);
  run('sh', ['-c', `cd "${stage}" && find . -print0 | cpio --null -o -H newc --quiet > "${image}"`]);
  rmSync(stage, { recursive: true, force: true });
  say(`initramfs with ${tarball}`);
  return image;
}

/**
 * Under TCG, norandmaps: with every process's binary and libraries at the same addresses, TCG
 * reuses what it translated for the last node process, where ASLR had it translate each one
 * afresh. A systemd boot (some 40 node starts), on a quiet host (2026-12-03): arm64 475 s and
 * 10.0 CPU-minutes with it, 593-615 s and 13.2 without; amd64 356-358 s and 7.2-7.3, 431-450 s
 * and 9.4-9.8 without. KVM runs the guest's code natively: there the guest keeps its ASLR.
 */
const TCG_APPEND = ' norandmaps';
/** What qemu prints when KVM will not run this guest (this CPU model under nested virtualisation). */
const KVM_REFUSED = /KVM internal error|kvm_buf_set_msrs|failed to set MSR/;

function boot(kernel, release, image, useKvm, init) {
  const kvm = useKvm && MACHINE.kvm && existsSync('/dev/kvm') && spawnSync('sh', ['-c', 'test -r /dev/kvm && test -w /dev/kvm']).status === 0;
  const vmlinuz = join(kernel, 'image', 'boot', `vmlinuz-${release}`);
  const args = [
    ...MACHINE.board,
    ...(kvm ? ['-enable-kvm', '-cpu', 'host'] : ['-cpu', MACHINE.tcgCpu]),
    '-m', '2048', '-smp', '2', '-nographic', '-no-reboot', '-nic', 'none',
    '-kernel', vmlinuz, '-initrd', image,
    '-append', `console=${MACHINE.console} rdinit=${init} panic=-1 quiet loglevel=3 systemd.show_status=0${kvm ? '' : TCG_APPEND}`,
  ];
  say(`booting ${release} under qemu (${kvm ? 'KVM' : 'TCG: slower'}); the console goes to ${relative(ROOT, CONSOLE)}`);
  const fd = openSync(CONSOLE, 'w');
  try {
    // When KVM refuses the guest, qemu does not exit: it stops the VM and waits. The boot would
    // then hold the whole 20-minute timeout before TCG is tried (seen on these VMs under nested
    // virtualisation: 40 minutes of a CI run for the two amd64 boots). So the console is watched,
    // and qemu ended as soon as it says so.
    const watched = `"$@" & q=$!
trap 'kill -9 $q 2>/dev/null; exit 1' TERM
while kill -0 $q 2>/dev/null; do
  grep -qE '${KVM_REFUSED.source}' "${CONSOLE}" && { kill -9 $q; break; }
  sleep 1
done
wait $q`;
    spawnSync('sh', ['-c', watched, 'sh', MACHINE.qemu, ...args], { stdio: ['ignore', fd, fd], timeout: 20 * 60_000 });
  } finally {
    closeSync(fd);
  }
  return readFileSync(CONSOLE, 'utf8');
}

try {
  if (!MACHINE) throw new Error(`unknown CPU ${ARCH} (amd64 or arm64)`);
  const unknown = BOOTS.filter((b) => !['gpio', 'trixie', 'bookworm'].includes(b));
  if (unknown.length > 0) throw new Error(`unknown boot ${unknown.join(', ')} (gpio, trixie, bookworm)`);
  if (process.getuid?.() !== 0) throw new Error('needs root (mmdebstrap, chroot)');
  for (const [cmd, pkg] of [['mmdebstrap', 'mmdebstrap'], ...(FOREIGN ? [['arch-test', 'arch-test']] : []), [MACHINE.qemu, MACHINE.qemuPackage], ['cpio', 'cpio'], ['dpkg-deb', 'dpkg']]) {
    if (!have(cmd)) throw new Error(`${cmd} is missing (apt install ${pkg})`);
  }
  if (FOREIGN) foreignBinaries();
  buildRoot();
  if (BOOTS.includes('trixie')) trixieRoot();
  if (BOOTS.includes('bookworm') || (BOOTS.includes('gpio') && GPIO_ROOT === BOOKWORM_ROOT)) bookwormRoot();
  const release = kernelRelease();
  const kernel = kernelAndModule(release);
  const bootAndRead = (mode, init, marker, root) => {
    const image = initramfs(release, kernel, mode, root);
    let useKvm = true;
    let console = boot(kernel, release, image, useKvm, init);
    // /dev/kvm can be there and still refuse this CPU model (nested virtualisation): then TCG.
    if (!console.includes(marker) && KVM_REFUSED.test(console)) {
      say('KVM refused the guest; booting again under TCG');
      useKvm = false;
      console = boot(kernel, release, image, useKvm, init);
    }
    // TCG has panicked the guest's kernel in its own timer code a second into boot, before init
    // ran (seen once: enqueue_timer, "Fatal exception in interrupt"). Nothing of ours had run yet,
    // so that boot says nothing about the agent: boot once more. A panic after the test began
    // still fails.
    if (!console.includes(marker) && /Kernel panic/.test(console) && !/^ok: /m.test(console)) {
      say('the guest kernel panicked during boot, before the test began; booting once more');
      console = boot(kernel, release, image, useKvm, init);
    }
    // The guest's terminal resets (ESC c, ESC [2J...) can share a line with what the test printed.
    // eslint-disable-next-line no-control-regex -- ESC is exactly what is removed
    const lines = console.replace(/\x1b(\[[0-9;?]*[A-Za-z]|c)/g, '').split(/\r?\n/).filter((l) => /^(ok: |kernel |systemd \d|gpio chip|KERNEL-TEST|SYSTEMD-TEST)/.test(l) || /FAIL/.test(l));
    for (const l of lines) process.stdout.write(`  ${l}\n`);
    if (!console.includes(`${marker} PASS`)) {
      process.stdout.write(console.split(/\r?\n/).slice(-40).join('\n'));
      throw new Error(`the ${mode} test in the VM (${basename(root)}) did not pass`);
    }
    rmSync(image);
    return lines;
  };
  const lines = [
    ...(BOOTS.includes('gpio') ? bootAndRead('gpio', '/init', 'KERNEL-TEST', GPIO_ROOT) : []),
    ...(BOOTS.includes('trixie') ? bootAndRead('systemd', '/lib/systemd/systemd', 'SYSTEMD-TEST', TRIXIE_ROOT) : []),
    ...(BOOTS.includes('bookworm') ? bootAndRead('systemd', '/lib/systemd/systemd', 'SYSTEMD-TEST', BOOKWORM_ROOT) : []),
  ];
  const under = { gpio: 'the GPIO test', trixie: "systemd 257 (Debian 13's)", bookworm: "systemd 252 (Debian 12's)" };
  say(`passed: ${lines.filter((l) => l.startsWith('ok: ')).length} checks of the ${ARCH} package on a real ${ARCH} kernel: ${BOOTS.map((b) => under[b]).join(', ')}`);
} catch (err) {
  say(`FAILED: ${err.message}`);
  process.exitCode = 1;
}
