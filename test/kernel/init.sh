#!/bin/sh
# /init of the kernel test VM (scripts/kernel-test.mjs): mounts what the test needs, loads gpio-sim
# and lays out a Raspberry Pi 5's GPIO as the kernel presents it (another chip first, then the
# RP1 "pinctrl-rp1" with lines GPIO0..GPIO27), runs test/kernel/in-vm.mjs, and powers off.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
mount -t debugfs debugfs /sys/kernel/debug
mkdir -p /var/lib/chair-agent
ip link set lo up
fail() { echo "KERNEL-TEST FAIL: $*"; echo o > /proc/sysrq-trigger; sleep 5; }
modprobe configfs && mount -t configfs configfs /sys/kernel/config || fail "configfs"
modprobe gpio-sim || fail "modprobe gpio-sim"
cd /sys/kernel/config/gpio-sim || fail "no gpio-sim in configfs"
mkdir first first/bank0 && echo 32 > first/bank0/num_lines && echo gpio-brcmstb@107d508500 > first/bank0/label && echo 1 > first/live || fail "the first chip: $(ls first/bank0)"
mkdir pi pi/bank0 && echo 28 > pi/bank0/num_lines && echo pinctrl-rp1 > pi/bank0/label || fail "the RP1 chip"
i=0
while [ $i -lt 28 ]; do
  mkdir pi/bank0/line$i && echo GPIO$i > pi/bank0/line$i/name
  i=$((i + 1))
done
echo 1 > pi/live || fail "the RP1 chip live"
for c in /sys/kernel/config/gpio-sim/*/bank0; do echo "gpio chip: $(cat $c/chip_name) [$(cat $c/label)]"; done
cd /
/opt/chair-agent/runtime/bin/node /test/in-vm.mjs
echo o > /proc/sysrq-trigger
sleep 10
