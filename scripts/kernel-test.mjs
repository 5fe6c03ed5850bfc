#!/usr/bin/env node
// `npm run test:kernel`: the gpiod driver and `chair-agent gpio` against a real kernel's GPIO
// character device. Boots Debian 13's kernel under qemu (KVM where /dev/kvm can be used, TCG
// otherwise) with gpio-sim laying out lines named as on a Raspberry Pi 5, and runs
// test/kernel/in-vm.mjs there on the amd64 package's own runtime and app (dist/pkg, from
// `npm run package`): the listing, the pull-up, debounce under bounces, a held press, release on
// kill -9 and Ctrl-C, --blink read back from the lines, and press -> start -> LED blinking with
// the agent and the vendor simulator. Then it boots twice more with systemd as PID 1
// (test/kernel/systemd-check.sh, the package's unit as systemd runs it): on Debian 13's userland
// (systemd 257) and on Debian 12's (systemd 252, what Raspberry Pi OS Bookworm runs).
//
// Debian's kernels (12 and 13) are built without gpio-sim and without the IRQ simulator it needs,
// so both are built here as one out-of-tree module, from Debian 13's own linux-source, with its
// own compiler and headers, in a debootstrap root (cached in dist/kernel-test). Needs root,
// debootstrap, qemu-system-x86, cpio and Debian's mirror the first time; about 2 minutes after.
import { spawnSync } from 'node:child_process';
import { chmodSync, closeSync, cpSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CACHE = join(ROOT, 'dist', 'kernel-test');
const BUILD_ROOT = join(CACHE, 'trixie');
// Debian 12's userland (systemd 252, udev 252) on the same kernel: what Raspberry Pi OS Bookworm,
// the OS most site boxes run, gives the package's unit. No compiler: it only boots.
const BOOKWORM_ROOT = join(CACHE, 'bookworm');
const CONSOLE = join(CACHE, 'console.log');
const MIRROR = process.env.DEBIAN_MIRROR ?? 'http://deb.debian.org/debian';
const started = Date.now();
const say = (t) => process.stderr.write(`kernel-test [${((Date.now() - started) / 1000).toFixed(0)} s]: ${t}\n`);

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...opts });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  if (r.status !== 0 && !opts.allowFail) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}):\n${`${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n').slice(-20).join('\n')}`);
  return r;
}
const inRoot = (script) => run('chroot', [BUILD_ROOT, 'sh', '-c', script], { env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', HOME: '/root', LANG: 'C.UTF-8', DEBIAN_FRONTEND: 'noninteractive' } });
const have = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;

/**
 * Debian 13 with its kernel headers, compiler and kmod: where gpio-sim is built. Cached. With udev,
 * as every installed system has it: the systemd check sees what Debian's rules make of a GPIO chip.
 */
function buildRoot() {
  if (existsSync(join(BUILD_ROOT, '.ready')) && existsSync(join(BUILD_ROOT, 'usr', 'bin', 'udevadm'))) return;
  rmSync(BUILD_ROOT, { recursive: true, force: true });
  mkdirSync(CACHE, { recursive: true });
  say('debootstrap trixie with its kernel headers (once; cached in dist/kernel-test)');
  run('debootstrap', ['--variant=minbase', '--include=make,gcc,libc6-dev,kmod,iproute2,xz-utils,linux-headers-amd64,systemd,systemd-sysv,dbus,procps,udev', 'trixie', BUILD_ROOT, MIRROR]);
  cpSync('/etc/resolv.conf', join(BUILD_ROOT, 'etc', 'resolv.conf'));
  writeFileSync(join(BUILD_ROOT, '.ready'), '');
}

/** Debian 12 as a site box has it: systemd and udev 252, Debian 12's kmod and util-linux. Cached. */
function bookwormRoot() {
  if (existsSync(join(BOOKWORM_ROOT, '.ready'))) return;
  rmSync(BOOKWORM_ROOT, { recursive: true, force: true });
  say('debootstrap bookworm with systemd and udev (once; cached in dist/kernel-test)');
  run('debootstrap', ['--variant=minbase', '--include=kmod,iproute2,systemd,systemd-sysv,dbus,procps,udev', 'bookworm', BOOKWORM_ROOT, MIRROR]);
  writeFileSync(join(BOOKWORM_ROOT, '.ready'), '');
}

/** The kernel release the headers are for, e.g. 6.12.117+deb13-amd64. */
function kernelRelease() {
  const dir = readdirSync(join(BUILD_ROOT, 'usr', 'src')).find((d) => /^linux-headers-.*-amd64$/.test(d));
  if (!dir) throw new Error('no linux-headers-*-amd64 in the build root');
  return dir.slice('linux-headers-'.length);
}

/** The kernel image, its modules, and gpio-sim.ko built for it. Cached per kernel release. */
function kernelAndModule(release) {
  const out = join(CACHE, `kernel-${release}`);
  if (existsSync(join(out, 'gpio-sim.ko'))) return out;
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const series = release.split('.').slice(0, 2).join('.');
  say(`fetching linux-image-${release} and linux-source-${series}`);
  inRoot(`cd /tmp && rm -f *.deb && apt-get update -qq && apt-get download -qq linux-image-${release} linux-source-${series}`);
  const tmp = join(BUILD_ROOT, 'tmp');
  const image = readdirSync(tmp).find((f) => f.startsWith(`linux-image-${release}_`));
  const source = readdirSync(tmp).find((f) => f.startsWith(`linux-source-${series}_`));
  run('dpkg-deb', ['-x', join(tmp, image), join(out, 'image')]);
  say('building gpio-sim and the IRQ simulator as one module, with Debian 13\'s compiler and headers');
  const build = join(BUILD_ROOT, 'build');
  rmSync(build, { recursive: true, force: true });
  mkdirSync(build);
  inRoot(`cd /build && dpkg-deb --fsys-tarfile /tmp/${source} | tar -xO ./usr/src/linux-source-${series}.tar.xz | tar -xJ --strip-components=1 linux-source-${series}/drivers/gpio/gpio-sim.c linux-source-${series}/kernel/irq/irq_sim.c`);
  // The IRQ simulator is built into kernels that have it; a module cannot use irq_to_desc, which
  // is not exported, and generic_handle_irq does the same for a mapped interrupt.
  const irqSim = join(build, 'kernel', 'irq', 'irq_sim.c');
  writeFileSync(irqSim, readFileSync(irqSim, 'utf8').replace('handle_simple_irq(irq_to_desc(irqnum));', 'generic_handle_irq(irqnum);'));
  cpSync(join(build, 'drivers', 'gpio', 'gpio-sim.c'), join(build, 'gpio-sim-main.c'));
  cpSync(irqSim, join(build, 'irq_sim.c'));
  writeFileSync(join(build, 'Makefile'), 'obj-m := gpio-sim.o\ngpio-sim-y := gpio-sim-main.o irq_sim.o\n');
  inRoot(`cd /build && make -s -C /usr/src/linux-headers-${release} M=/build modules`);
  cpSync(join(build, 'gpio-sim.ko'), join(out, 'gpio-sim.ko'));
  rmSync(join(tmp, image));
  rmSync(join(tmp, source));
  return out;
}

/**
 * The VM's whole file system, as an initramfs: a Debian root (13's without the compiler, or 12's),
 * Debian 13's kernel modules with gpio-sim, the package, the test.
 */
function initramfs(release, kernel, mode, root) {
  // This build's, as package-check takes it: dist/pkg keeps the tarballs of earlier builds too.
  const version = JSON.parse(readFileSync(join(ROOT, 'dist', 'agent', 'build-info.json'), 'utf8')).version;
  const tarball = `chair-agent-${version}-linux-amd64.tar.gz`;
  if (!existsSync(join(ROOT, 'dist', 'pkg', tarball))) throw new Error(`dist/pkg has no ${tarball} (this build's): npm run package -- amd64`);
  const stage = join(CACHE, 'stage');
  rmSync(stage, { recursive: true, force: true });
  mkdirSync(stage);
  const excludes = ['./usr/share/perl', './usr/lib/x86_64-linux-gnu/perl-base', './usr/share/zoneinfo', './usr/share/i18n', './usr/share/info', './usr/src', './usr/lib/gcc', './usr/libexec/gcc', './usr/share/doc', './usr/share/man', './usr/share/locale', './usr/lib/x86_64-linux-gnu/perl', './var/cache/apt', './var/lib/apt/lists', './build', './tmp/*', './.ready'];
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
  run('chroot', [stage, 'depmod', release]);
  run('tar', ['-xzf', join(ROOT, 'dist', 'pkg', tarball), '-C', join(stage, 'opt')]);
  mkdirSync(join(stage, 'test'));
  cpSync(join(ROOT, 'test', 'kernel', 'in-vm.mjs'), join(stage, 'test', 'in-vm.mjs'));
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
    for (const unit of ['serial-getty@ttyS0.service', 'getty@tty1.service', 'systemd-timesyncd.service']) symlinkSync('/dev/null', join(units, unit));
    writeFileSync(join(stage, 'etc', 'machine-id'), '');
  }
  // Uncompressed: under TCG the kernel's gunzip of it took longer than the test.
  const image = join(CACHE, `initramfs-${mode}-${basename(root)}.cpio`);
  run('sh', ['-c', `cd "${stage}" && find . -print0 | cpio --null -o -H newc --quiet > "${image}"`]);
  rmSync(stage, { recursive: true, force: true });
  say(`initramfs with ${tarball}`);
  return image;
}

function boot(kernel, release, image, useKvm, init) {
  const kvm = useKvm && existsSync('/dev/kvm') && spawnSync('sh', ['-c', 'test -r /dev/kvm && test -w /dev/kvm']).status === 0;
  const vmlinuz = join(kernel, 'image', 'boot', `vmlinuz-${release}`);
  const args = [
    ...(kvm ? ['-enable-kvm', '-cpu', 'host'] : ['-cpu', 'max']),
    '-m', '2048', '-smp', '2', '-nographic', '-no-reboot', '-nic', 'none',
    '-kernel', vmlinuz, '-initrd', image,
    '-append', `console=ttyS0 rdinit=${init} panic=-1 quiet loglevel=3 systemd.show_status=0`,
  ];
  say(`booting ${release} under qemu (${kvm ? 'KVM' : 'TCG: slower'}); the console goes to ${relative(ROOT, CONSOLE)}`);
  const fd = openSync(CONSOLE, 'w');
  try {
    spawnSync('qemu-system-x86_64', args, { stdio: ['ignore', fd, fd], timeout: 20 * 60_000 });
  } finally {
    closeSync(fd);
  }
  return readFileSync(CONSOLE, 'utf8');
}

try {
  if (process.getuid?.() !== 0) throw new Error('needs root (debootstrap, chroot)');
  for (const [cmd, pkg] of [['debootstrap', 'debootstrap'], ['qemu-system-x86_64', 'qemu-system-x86'], ['cpio', 'cpio'], ['dpkg-deb', 'dpkg']]) {
    if (!have(cmd)) throw new Error(`${cmd} is missing (apt install ${pkg})`);
  }
  buildRoot();
  bookwormRoot();
  const release = kernelRelease();
  const kernel = kernelAndModule(release);
  const bootAndRead = (mode, init, marker, root = BUILD_ROOT) => {
    const image = initramfs(release, kernel, mode, root);
    let useKvm = true;
    let console = boot(kernel, release, image, useKvm, init);
    // /dev/kvm can be there and still refuse this CPU model (nested virtualisation): then TCG.
    if (!console.includes(marker) && /KVM internal error|kvm_buf_set_msrs|failed to set MSR/.test(console)) {
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
    ...bootAndRead('gpio', '/init', 'KERNEL-TEST'),
    ...bootAndRead('systemd', '/lib/systemd/systemd', 'SYSTEMD-TEST'),
    ...bootAndRead('systemd', '/lib/systemd/systemd', 'SYSTEMD-TEST', BOOKWORM_ROOT),
  ];
  say(`passed: ${lines.filter((l) => l.startsWith('ok: ')).length} checks on a real kernel, with and without systemd (Debian 13's 257 and Debian 12's 252)`);
} catch (err) {
  say(`FAILED: ${err.message}`);
  process.exitCode = 1;
}
