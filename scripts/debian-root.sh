#!/usr/bin/env bash
# A Debian minbase root, as an installed system of that release has it today: the point release,
# its updates and security updates, and PACKAGES (with their dependencies, no recommends).
#
#   scripts/debian-root.sh SUITE ARCH DIR [PACKAGE...]      (as root; DIR must not exist or be empty)
#
# ARCH may be a list, the root's own CPU first: amd64,arm64 is an amd64 root whose apt also has
# arm64's packages (the kernel test's cross build of an arm64 module).
#
# Used for the roots the kernel test boots (scripts/kernel-test.mjs) and CI's fresh machines
# (.ci/fresh-machine). mmdebstrap rather than debootstrap: it resolves and fetches everything with
# apt on the host and installs it in one dpkg run, where debootstrap installs the base first, then
# the included packages, then the updates on top. For a foreign CPU every maintainer script and
# dpkg itself run under qemu user emulation, and there that order (the point release's kernel
# headers installed, then the update's, and an initramfs made for each) took 17.5 minutes for the
# kernel test's arm64 build root, against 5 this way (on CI's 2-core VM, 2026-12-03).
#
# Two settings hold while the root is made and are gone from it after: dpkg's unsafe I/O (no
# fsync per unpacked file: a root half made is thrown away, never used), and no initramfs-tools
# kernel hook, so the kernel that Debian's headers depend on gets no initramfs made under
# emulation (nothing boots it: the kernel test makes the VM's own). The mirrors are
# $DEBIAN_MIRROR and $DEBIAN_SECURITY_MIRROR (default deb.debian.org).
set -euo pipefail

suite="${1:?usage: scripts/debian-root.sh SUITE ARCH DIR [PACKAGE...]}"
arch="${2:?usage: scripts/debian-root.sh SUITE ARCH DIR [PACKAGE...]}"
dir="${3:?usage: scripts/debian-root.sh SUITE ARCH DIR [PACKAGE...]}"
shift 3
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"

command -v mmdebstrap >/dev/null || { echo "debian-root: mmdebstrap is missing (apt install mmdebstrap)" >&2; exit 1; }
# mmdebstrap checks a foreign CPU's binaries run (through binfmt_misc) with arch-test.
if [ "${arch%%,*}" != "$(dpkg --print-architecture)" ] && ! command -v arch-test >/dev/null; then
  echo "debian-root: arch-test is missing (apt install arch-test)" >&2
  exit 1
fi

include=()
[ $# -gt 0 ] && include=("--include=$(
  IFS=,
  echo "$*"
)")

# While it is made only (the customize hook takes it out again).
build_cfg=etc/dpkg/dpkg.cfg.d/99chair-agent-root-build
# Kept: the package lists (a fresh machine's apt install works without an update first, as on an
# installed system) and what mmdebstrap's reproducibility step would empty (/etc/machine-id, which
# systemd's first boot would otherwise treat as a new machine's).
# merged-usr: /usr merged up front and usr-is-merged installed, as Debian's installer and
# debootstrap make a Debian 12 or 13 system (without it, apt picks the usrmerge converter and perl).
exec mmdebstrap --variant=minbase --architectures="$arch" "${include[@]}" \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --skip=cleanup/apt/lists,cleanup/reproducible \
  --setup-hook="mkdir -p \"\$1/etc/dpkg/dpkg.cfg.d\" && printf 'force-unsafe-io\npath-exclude=/etc/kernel/postinst.d/initramfs-tools\n' > \"\$1/$build_cfg\"" \
  --customize-hook="rm -f \"\$1/$build_cfg\"" \
  "$suite" "$dir" \
  "deb $mirror $suite main" \
  "deb $mirror $suite-updates main" \
  "deb $security $suite-security main"
