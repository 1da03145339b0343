#!/usr/bin/env bash
# Run a riscv64 command inside a QEMU TCG RISC-V virt machine whose emulated
# CPU has the H extension, where a riscv64 Linux with KVM built in provides
# /dev/kvm.  The host filesystem is shared read-only (virtio-9p) and the
# workdir read-write; COMMAND must be a static riscv64 program (the host's
# own binaries are x86).  See README.md.
#
# Usage: run.sh [options] -- COMMAND [ARGS...]
#   --smp N           virtual harts (default 1)
#   --mem MiB         guest memory (default 1024)
#   --timeout SECS    kill the VM after SECS seconds, exit 124 (default 600, 0 = none)
#   --workdir DIR     directory exported read-write, COMMAND's cwd (default: cwd)
#   --env NAME[=VAL]  also pass NAME to COMMAND (repeatable); CI, HOME, PATH
#                     and LOCKVISOR_* are always passed
#   --retry-frozen N  run COMMAND again in a new machine, up to N times, when
#                     the machine freezes under it (default 0; for commands
#                     that can simply be run again)
#   --verbose         kernel log and guest init messages on stderr
# Exit status: COMMAND's; 124 on timeout; 125 if the VM failed to run it.
# A VM that dies while booting, or has not started COMMAND after
# LOCKVISOR_NESTED_BOOT_TIMEOUT seconds (default 300), is retried twice. A
# machine whose init stops its 5 s heartbeat for LOCKVISOR_NESTED_FREEZE_TIMEOUT
# seconds (default 90) while COMMAND runs has frozen: it is killed (125).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly OPENSBI=/usr/lib/riscv64-linux-gnu/opensbi/generic/fw_dynamic.bin
# Read by nested-lib.sh: the prefix of its messages, and the largest --smp
# (the nested kernel's CONFIG_NR_CPUS).
# shellcheck disable=SC2034
nested_name=nested-riscv
# shellcheck disable=SC2034
max_harts=$(sed -n 's/^CONFIG_NR_CPUS=//p' "$here/kernel.config")
# shellcheck source-path=SCRIPTDIR source=../nested-lib.sh
. "$here/../nested-lib.sh"
nested_parse_options 23 "$@"

command -v qemu-system-riscv64 >/dev/null 2>&1 ||
	{ nested_err "qemu-system-riscv64 not found (apt-get install qemu-system-misc)"; exit 125; }
[ -r "$OPENSBI" ] || { nested_err "$OPENSBI not found (apt-get install opensbi)"; exit 125; }
command -v cpio >/dev/null 2>&1 || { nested_err "cpio not found (apt-get install cpio)"; exit 125; }
prepared=$("$here/prepare.sh") || { nested_err "prepare.sh failed"; exit 125; }
kernel=$(sed -n 1p <<<"$prepared")
init=$(sed -n 2p <<<"$prepared")

nested_make_tmp
nested_export_outer_host

# The initramfs: /init and what it reads (init.cpp's header), NUL-separated
# so that no argument or value needs quoting.
mkdir -p "$tmp/rd/run"
cp "$init" "$tmp/rd/init"
printf '%s' "$workdir" >"$tmp/rd/run/workdir"
printf '%s\0' "${nested_command[@]}" >"$tmp/rd/run/argv"
nested_passed_environment >"$tmp/rd/run/env"
(cd "$tmp/rd" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) >"$tmp/initrd.cpio" ||
	{ nested_err "cannot build the initramfs"; exit 125; }

# The virt machine has one UART: it carries the kernel console (a log file);
# the command's output and init's status lines go through virtio-serial
# ports, so that neither needs parsing out of the kernel's messages. The
# output port writes to a file that run.sh follows: a port on QEMU's stdio
# would count as closed once stdin (/dev/null) reads end-of-file, and the
# guest's writes to a closed port block forever.
# shellcheck disable=SC2054 # the commas are inside QEMU option values
qemu=(qemu-system-riscv64 -nodefaults -no-user-config -machine virt
	-cpu rv64,h=true -smp "$smp" -m "$mem" -bios "$OPENSBI"
	-kernel "$kernel" -initrd "$tmp/initrd.cpio"
	-append "console=ttyS0 panic=-1 $(nested_kernel_log)"
	-display none -no-reboot
	-chardev "file,id=log,path=$(nested_qe "$tmp/console.log")" -serial chardev:log
	-device virtio-serial-device
	-chardev "file,id=out,path=$(nested_qe "$tmp/output")" -device virtserialport,chardev=out,name=lockvisor.output
	-chardev "file,id=status,path=$(nested_qe "$tmp/status")" -device virtserialport,chardev=status,name=lockvisor.status
	-fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap
	-device virtio-9p-device,fsdev=hostroot,mount_tag=hostroot
	-fsdev "local,id=workdir,path=$(nested_qe "$workdir"),security_model=none,multidevs=remap"
	-device virtio-9p-device,fsdev=workdir,mount_tag=workdir)
# For debugging a stuck machine: QEMU's human monitor on a Unix socket
# (e.g. `echo 'info registers' | socat - UNIX-CONNECT:SOCKET`).
[ -z "${LOCKVISOR_NESTED_MONITOR:-}" ] || qemu+=(-monitor "unix:$(nested_qe "$LOCKVISOR_NESTED_MONITOR"),server=on,wait=off")

# Streams the command's output to stdout while the machine runs; tail ends by
# itself once QEMU has exited and all of the file is out.
tail_pid=
nested_on_boot() {
	: >"$tmp/output"
	tail -c +1 -s 0.2 -f --pid="$1" "$tmp/output" &
	tail_pid=$!
}
nested_on_exit() {
	wait "$tail_pid" 2>/dev/null || true
}
nested_run_machine
