#!/bin/busybox sh
# shellcheck shell=dash
# /init of the nested-KVM guest (busybox sh; run.sh packs it into the initramfs).
#
# Serial ports, as wired by run.sh:
#   ttyS0  the command's stdout+stderr  -> run.sh's stdout
#   ttyS1  kernel console and this script's own messages -> a log file
#   ttyS2  status -> a status file: "started" once the command is about to
#          run, "alive" every 5 s while it runs, then "exit=<code>"; or
#          "error=<message>" if init fails
# /run.conf (from run.sh) sets WORKDIR and MSIZE; /cmd.sh is the script that
# the host's /bin/sh runs inside the chroot (environment, cd, exec COMMAND).

/bin/busybox mkdir -p /bin /dev /proc /sys /host
/bin/busybox --install -s /bin
export PATH=/bin
mount -t devtmpfs devtmpfs /dev
exec </dev/null >/dev/console 2>&1

report() {
	echo "$1" >/dev/ttyS2
}
die() {
	echo "nested-kvm init: error: $*"
	report "error=$*"
	sync
	poweroff -f
	exit 1
}

mount -t proc proc /proc || die "cannot mount /proc"
mount -t sysfs sysfs /sys || die "cannot mount /sys"
# shellcheck source=/dev/null
. /run.conf || die "cannot read /run.conf"

while read -r mod; do
	insmod "/lib/modules/$mod" || die "insmod $mod failed"
done </modules.load
[ -c /dev/kvm ] || die "/dev/kvm did not appear after loading kvm_amd (no SVM in the emulated CPU?)"

mount_9p() { # tag dir options
	i=0
	until mount -t 9p -o "trans=virtio,version=9p2000.L,msize=$MSIZE,$3" "$1" "$2" 2>/dev/null; do
		i=$((i + 1))
		[ "$i" -lt 50 ] || die "cannot mount 9p share '$1' on $2"
		sleep 0.1
	done
}

mount_9p hostroot /host ro,cache=loose
# /tmp: the host's /tmp read-only, with writes going to a tmpfs (overlay);
# a plain empty tmpfs if the overlay cannot be mounted.
mkdir -p /tmpfs
mount -t tmpfs tmpfs /tmpfs || die "cannot mount a tmpfs for /tmp"
mkdir -p /tmpfs/upper /tmpfs/work
chmod 1777 /tmpfs/upper
if ! mount -t overlay -o lowerdir=/host/tmp,upperdir=/tmpfs/upper,workdir=/tmpfs/work overlay /host/tmp; then
	echo "nested-kvm init: warning: overlay on /tmp failed; /tmp is an empty tmpfs"
	mount -t tmpfs -o mode=1777 tmpfs /host/tmp || die "cannot mount tmpfs on /tmp"
fi
[ -d "/host$WORKDIR" ] || mkdir -p "/host$WORKDIR" || die "cannot create $WORKDIR"
mount_9p workdir "/host$WORKDIR" cache=mmap
mount -t proc proc /host/proc || die "cannot mount /proc in the chroot"
mount -t sysfs sysfs /host/sys || die "cannot mount /sys in the chroot"
mount -t devtmpfs devtmpfs /host/dev || die "cannot mount /dev in the chroot"
mkdir -p /host/dev/pts /host/dev/shm
mount -t devpts -o ptmxmode=0666 devpts /host/dev/pts || die "cannot mount /dev/pts"
mount -t tmpfs -o mode=1777 tmpfs /host/dev/shm || die "cannot mount /dev/shm"
cp /cmd.sh /host/tmp/.lockvisor-nested-cmd.sh || die "cannot copy the command script"

report started
# A heartbeat on the status port while the command runs (busybox's own
# sleep, nothing from the 9p shares): run.sh tells a machine that froze from
# a command that only takes long.
(while :; do
	sleep 5
	report alive
done) &
heartbeat=$!
# Keep ttyS0 open here so its settings stick and it can be drained afterwards.
exec 3>/dev/ttyS0
stty -opost <&3 # no LF -> CRLF translation: the host sees the bytes as written
env -i /bin/chroot /host /bin/sh /tmp/.lockvisor-nested-cmd.sh </dev/null >&3 2>&3 3>&-
rc=$?
kill "$heartbeat" 2>/dev/null
wait "$heartbeat" 2>/dev/null
# stty sets the termios with TCSADRAIN: returns once all output left the UART.
stty -opost <&3
exec 3>&-
report "exit=$rc"
sync
poweroff -f
