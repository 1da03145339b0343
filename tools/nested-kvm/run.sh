#!/usr/bin/env bash
# Run a command inside a QEMU TCG virtual machine whose emulated AMD CPU has
# SVM, where the guest kernel's own KVM (kvm_amd) provides /dev/kvm.  The host
# filesystem is shared read-only (virtio-9p) and the workdir read-write, so
# host binaries, libraries and build trees work unchanged.  See README.md.
#
# Usage: run.sh [options] -- COMMAND [ARGS...]
#   --smp N           virtual CPUs (default 1; TCG runs them on one host thread)
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
# Read by nested-lib.sh: the prefix of its messages, the qemu stderr lines
# its failure report leaves out (QEMU's EPYC model names features TCG does
# not emulate) and what its freeze warning adds. --smp has no limit here.
# shellcheck disable=SC2034
nested_name=nested-kvm
# shellcheck disable=SC2034
qemu_err_noise="TCG doesn't support requested feature"
# shellcheck disable=SC2034
freeze_hint="QEMU TCG SVM, docs/linux-guests-nested.md"
# shellcheck source-path=SCRIPTDIR source=../nested-lib.sh
. "$here/../nested-lib.sh"
nested_parse_options 22 "$@"
# LOCKVISOR_NESTED_TCG_THREAD=multi selects multi-threaded TCG instead (README.md).
tcg_thread=${LOCKVISOR_NESTED_TCG_THREAD:-single}
case "$tcg_thread" in
single | multi) ;;
*) nested_usage_error "LOCKVISOR_NESTED_TCG_THREAD must be 'single' or 'multi'" ;;
esac

command -v qemu-system-x86_64 >/dev/null 2>&1 ||
	{ nested_err "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"; exit 125; }
prepared=$("$here/prepare.sh") || { nested_err "prepare.sh failed"; exit 125; }

nested_make_tmp
nested_export_outer_host

# Single-quote for sh: 'it'\''s'.
shq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# The per-run part of the initramfs: /init, /run.conf and /cmd.sh (COMMAND's
# environment as exports, in nested_passed_environment's order, then COMMAND).
mkdir "$tmp/rd"
cp "$here/init.sh" "$tmp/rd/init"
chmod 755 "$tmp/rd/init"
{
	printf 'WORKDIR=%s\n' "$(shq "$workdir")"
	printf 'MSIZE=%s\n' 262144
} >"$tmp/rd/run.conf"
{
	while IFS= read -r -d '' assignment; do
		printf 'export %s=%s\n' "${assignment%%=*}" "$(shq "${assignment#*=}")"
	done < <(nested_passed_environment)
	printf 'cd %s || exit 125\n' "$(shq "$workdir")"
	printf 'exec'
	for arg in "${nested_command[@]}"; do
		printf ' %s' "$(shq "$arg")"
	done
	printf '\n'
} >"$tmp/rd/cmd.sh"
(cd "$tmp/rd" && find . | "$prepared/busybox" cpio -o -H newc 2>/dev/null) | gzip -1 >"$tmp/run.gz"
cat "$prepared/initrd-base.gz" "$tmp/run.gz" >"$tmp/initrd.gz"

# thread=single (tcg_thread above): multi-threaded TCG with several vCPUs hung in soft lockups.
# shellcheck disable=SC2054 # the commas are inside QEMU option values
qemu=(qemu-system-x86_64 -nodefaults -no-user-config -machine pc
	-accel "tcg,thread=$tcg_thread" -cpu EPYC,+svm -smp "$smp" -m "$mem"
	-kernel "$prepared/kernel" -initrd "$tmp/initrd.gz"
	-append "console=ttyS1 panic=-1 no_timer_check $(nested_kernel_log)"
	-display none -no-reboot
	-chardev stdio,id=out,signal=off -serial chardev:out
	-chardev "file,id=log,path=$(nested_qe "$tmp/console.log")" -serial chardev:log
	-chardev "file,id=status,path=$(nested_qe "$tmp/status")" -serial chardev:status
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap
	-virtfs "local,path=$(nested_qe "$workdir"),mount_tag=workdir,security_model=none,multidevs=remap")
# For debugging a stuck machine: QEMU's human monitor on a Unix socket
# (e.g. `echo 'info registers' | socat - UNIX-CONNECT:SOCKET`).
[ -z "${LOCKVISOR_NESTED_MONITOR:-}" ] || qemu+=(-monitor "unix:$(nested_qe "$LOCKVISOR_NESTED_MONITOR"),server=on,wait=off")

nested_run_machine
