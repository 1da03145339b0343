#!/usr/bin/env bash
# Build the tiny initramfs used to time a Linux guest's boot: a static busybox
# and an /init that prints "INIT-REACHED" on the console first, then a few
# facts (CPUs online, clocksource, timer interrupts), and reboots (with QEMU -no-reboot and reboot=t the VM ends).
#
# Usage: mkinitrd.sh OUTPUT.gz [BUSYBOX]   (BUSYBOX defaults to /bin/busybox,
# which must be statically linked: Debian's busybox-static)
set -euo pipefail
out=${1:?usage: mkinitrd.sh OUTPUT.gz [BUSYBOX]}
bb=${2:-/bin/busybox}
file -L "$bb" 2>/dev/null | grep -q 'statically linked' ||
	{ echo "mkinitrd: $bb is not a static busybox (apt-get install busybox-static)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/dev" "$tmp/proc" "$tmp/sys"
cp "$bb" "$tmp/bin/busybox"
mknod -m 600 "$tmp/dev/console" c 5 1
cat >"$tmp/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox echo INIT-REACHED
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
echo "nproc=$(/bin/busybox nproc) uptime=$(/bin/busybox cat /proc/uptime)"
echo "clocksource=$(/bin/busybox cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
/bin/busybox grep -E '^ *(CPU|LOC|[0-9]+):|TLB|RES|CAL' /proc/interrupts
/bin/busybox dmesg | /bin/busybox grep -E 'PV spinlock|smp: Brought up|soft lockup|kvm-clock: using|clocksource: Switched|rtc' | /bin/busybox sed 's/^/dmesg: /'
echo INIT-DONE
/bin/busybox reboot -f
INIT
chmod 755 "$tmp/init"
(cd "$tmp" && find . | LC_ALL=C sort | "$bb" cpio -o -H newc 2>/dev/null) | gzip -6 >"$out"
