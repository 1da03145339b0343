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

err() { printf 'nested-kvm: error: %s\n' "$*" >&2; }
usage_error() {
	err "$*"
	printf 'usage: %s [--smp N] [--mem MiB] [--timeout SECS] [--workdir DIR] [--env NAME[=VAL]] [--retry-frozen N] [--verbose] -- COMMAND [ARGS...]\n' "$0" >&2
	exit 2
}
is_uint() { case "$1" in '' | *[!0-9]*) return 1 ;; esac }

smp=1
mem=1024
timeout=600
workdir=.
verbose=0
extra_env=()
retry_frozen=0
while [ $# -gt 0 ]; do
	case "$1" in
	--smp | --mem | --timeout | --workdir | --env | --retry-frozen)
		[ $# -ge 2 ] || usage_error "$1 needs a value"
		case "$1" in
		--smp) smp=$2 ;;
		--mem) mem=$2 ;;
		--timeout) timeout=$2 ;;
		--workdir) workdir=$2 ;;
		--env) extra_env+=("$2") ;;
		--retry-frozen) retry_frozen=$2 ;;
		esac
		shift 2
		;;
	--smp=* | --mem=* | --timeout=* | --workdir=* | --env=* | --retry-frozen=*)
		set -- "${1%%=*}" "${1#*=}" "${@:2}"
		;;
	-v | --verbose) verbose=1; shift ;;
	-h | --help) sed -n '2,22s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
	--) shift; break ;;
	-*) usage_error "unknown option $1" ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || usage_error "no command given"
{ is_uint "$smp" && [ "$smp" -ge 1 ]; } || usage_error "--smp needs a positive integer"
{ is_uint "$mem" && [ "$mem" -ge 128 ]; } || usage_error "--mem needs an integer >= 128 (MiB)"
is_uint "$timeout" || usage_error "--timeout needs a non-negative integer (seconds)"
is_uint "$retry_frozen" || usage_error "--retry-frozen needs a non-negative integer"
[ -d "$workdir" ] || usage_error "workdir '$workdir' is not a directory"
workdir=$(cd -P "$workdir" && pwd -P)
[ "$workdir" != / ] || usage_error "refusing to export / read-write; choose a --workdir"
# LOCKVISOR_NESTED_TCG_THREAD=multi selects multi-threaded TCG instead (README.md).
tcg_thread=${LOCKVISOR_NESTED_TCG_THREAD:-single}
case "$tcg_thread" in
single | multi) ;;
*) usage_error "LOCKVISOR_NESTED_TCG_THREAD must be 'single' or 'multi'" ;;
esac

command -v qemu-system-x86_64 >/dev/null 2>&1 ||
	{ err "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"; exit 125; }
prepared=$("$here/prepare.sh") || { err "prepare.sh failed"; exit 125; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockvisor-nested.XXXXXX")
qpid=
# shellcheck disable=SC2317 # called through the trap
cleanup() {
	[ -z "$qpid" ] || kill -TERM "$qpid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

# Single-quote for sh: 'it'\''s'.
shq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# The outer host, for lockvisor inside to mark its results as emulated and
# name the real machine (vmm/host/emulation.h; it believes the variable only
# on QEMU's emulated CPU). Passed on like every LOCKVISOR_* variable.
cpuinfo_field() { sed -n "s/^$1[[:space:]]*: //p" /proc/cpuinfo | head -n 1; }
outer_kvm=none
if [ -r "${LOCKVISOR_KVM_DEVICE:-/dev/kvm}" ] && [ -w "${LOCKVISOR_KVM_DEVICE:-/dev/kvm}" ]; then
	if [ -d /sys/module/kvm_pvm ]; then
		outer_kvm=PVM
	elif grep -q -m 1 -w vmx /proc/cpuinfo; then
		outer_kvm=VMX
	elif grep -q -m 1 -w svm /proc/cpuinfo; then
		outer_kvm=SVM
	else
		outer_kvm=unknown
	fi
fi
LOCKVISOR_OUTER_HOST="vendor=$(cpuinfo_field vendor_id);family=$(cpuinfo_field 'cpu family');model=$(cpuinfo_field model)"
LOCKVISOR_OUTER_HOST+=";stepping=$(cpuinfo_field stepping);kernel=$(uname -r);cpus=$(nproc --all);kvm=$outer_kvm"
export LOCKVISOR_OUTER_HOST

# The per-run part of the initramfs: /init, /run.conf and /cmd.sh.
mkdir "$tmp/rd"
cp "$here/init.sh" "$tmp/rd/init"
chmod 755 "$tmp/rd/init"
{
	printf 'WORKDIR=%s\n' "$(shq "$workdir")"
	printf 'MSIZE=%s\n' 262144
} >"$tmp/rd/run.conf"
{
	# A default PATH, overridden below by the host's.
	printf 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n'
	for name in CI HOME PATH $(compgen -e LOCKVISOR_); do
		[ -z "${!name+x}" ] || printf 'export %s=%s\n' "$name" "$(shq "${!name}")"
	done
	# --env last, so that it wins.
	for spec in "${extra_env[@]}"; do
		name=${spec%%=*}
		case "$name" in
		'' | [0-9]* | *[!A-Za-z0-9_]*) usage_error "--env: invalid variable name '$name'" ;;
		esac
		if [ "$spec" != "$name" ]; then
			printf 'export %s=%s\n' "$name" "$(shq "${spec#*=}")"
		elif [ -n "${!name+x}" ]; then
			printf 'export %s=%s\n' "$name" "$(shq "${!name}")"
		fi
	done
	printf 'cd %s || exit 125\n' "$(shq "$workdir")"
	printf 'exec'
	for arg in "$@"; do
		printf ' %s' "$(shq "$arg")"
	done
	printf '\n'
} >"$tmp/rd/cmd.sh"
(cd "$tmp/rd" && find . | "$prepared/busybox" cpio -o -H newc 2>/dev/null) | gzip -1 >"$tmp/run.gz"
cat "$prepared/initrd-base.gz" "$tmp/run.gz" >"$tmp/initrd.gz"

if [ "$verbose" = 1 ]; then
	klog="loglevel=7"
else
	klog="quiet loglevel=4"
fi
# QEMU option values escape ',' as ',,'.
qe() { printf '%s' "${1//,/,,}"; }
# thread=single (tcg_thread above): multi-threaded TCG with several vCPUs hung in soft lockups.
# shellcheck disable=SC2054 # the commas are inside QEMU option values
qemu=(qemu-system-x86_64 -nodefaults -no-user-config -machine pc
	-accel "tcg,thread=$tcg_thread" -cpu EPYC,+svm -smp "$smp" -m "$mem"
	-kernel "$prepared/kernel" -initrd "$tmp/initrd.gz"
	-append "console=ttyS1 panic=-1 no_timer_check $klog"
	-display none -no-reboot
	-chardev stdio,id=out,signal=off -serial chardev:out
	-chardev "file,id=log,path=$(qe "$tmp/console.log")" -serial chardev:log
	-chardev "file,id=status,path=$(qe "$tmp/status")" -serial chardev:status
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap
	-virtfs "local,path=$(qe "$workdir"),mount_tag=workdir,security_model=none,multidevs=remap")
# For debugging a stuck machine: QEMU's human monitor on a Unix socket
# (e.g. `echo 'info registers' | socat - UNIX-CONNECT:SOCKET`).
[ -z "${LOCKVISOR_NESTED_MONITOR:-}" ] || qemu+=(-monitor "unix:$(qe "$LOCKVISOR_NESTED_MONITOR"),server=on,wait=off")

show_logs() {
	local first
	if [ -s "$tmp/console.log" ]; then
		# From the first panic/oops line if any, else the end of the log.
		first=$(grep -n -m 1 -E 'Kernel panic|Oops|BUG:|nested-kvm init' "$tmp/console.log" | cut -d: -f1) || true
		if [ -n "$first" ]; then
			printf -- '--- guest console (from line %s) ---\n' "$first" >&2
			tail -n "+$first" "$tmp/console.log" | head -n 40 | tr -d '\r' >&2
		else
			printf -- '--- guest console (last 30 lines) ---\n' >&2
			tail -n 30 "$tmp/console.log" | tr -d '\r' >&2
		fi
	fi
	if grep -v "TCG doesn't support requested feature" "$tmp/qemu.err" | grep -q .; then
		printf -- '--- qemu stderr ---\n' >&2
		grep -v "TCG doesn't support requested feature" "$tmp/qemu.err" | tail -n 30 >&2
	fi
}

interrupted=0
trap 'interrupted=1; [ -z "$qpid" ] || kill -TERM "$qpid" 2>/dev/null || true' INT TERM HUP
# A VM that dies before the command started (e.g. a boot-time timer check
# failing while the host is overloaded) is retried: nothing has run yet.
max_attempts=3
# Seconds a boot may take before the command starts (~10 s on an idle 2-core
# host, ~60 s beside a busy build).
boot_timeout=${LOCKVISOR_NESTED_BOOT_TIMEOUT:-300}
{ is_uint "$boot_timeout" && [ "$boot_timeout" -ge 1 ]; } ||
	usage_error "LOCKVISOR_NESTED_BOOT_TIMEOUT needs a positive integer (seconds)"
# Seconds without the init's 5 s heartbeat after which the machine counts as
# frozen (its kernel no longer runs: docs/linux-guests-nested.md, QEMU 7.2's
# SVM emulation); far above the heartbeat's delay on a loaded host.
freeze_timeout=${LOCKVISOR_NESTED_FREEZE_TIMEOUT:-90}
{ is_uint "$freeze_timeout" && [ "$freeze_timeout" -ge 10 ]; } ||
	usage_error "LOCKVISOR_NESTED_FREEZE_TIMEOUT needs an integer >= 10 (seconds)"
frozen_runs=0

# Watches the running VM: stops a boot that has not started the command after
# boot_timeout (marker boot-stalled), and a machine whose heartbeat stopped
# for freeze_timeout while the command ran (marker frozen).
watch_vm() { # qemu-pid
	local t=0 beats last=0 seen=0
	while kill -0 "$1" 2>/dev/null; do
		sleep 1
		t=$((t + 1))
		if ! grep -q '^started' "$tmp/status"; then
			[ "$t" -lt "$boot_timeout" ] || { : >"$tmp/boot-stalled"; kill -TERM "$1"; return; }
			continue
		fi
		beats=$(grep -c -E '^(started|alive)' "$tmp/status") || true
		if [ "$beats" != "$seen" ]; then
			seen=$beats
			last=$t
		elif [ $((t - last)) -ge "$freeze_timeout" ]; then
			: >"$tmp/frozen"
			kill -TERM "$1"
			return
		fi
	done
}

attempt=1
while :; do
	: >"$tmp/console.log"
	: >"$tmp/status"
	tailpid=
	if [ "$verbose" = 1 ]; then
		tail -n +1 -f "$tmp/console.log" >&2 &
		tailpid=$!
	fi
	rm -f "$tmp/boot-stalled" "$tmp/frozen"
	timeout --signal=TERM --kill-after=10 "$timeout" "${qemu[@]}" </dev/null 2>"$tmp/qemu.err" &
	qpid=$!
	watch_vm "$qpid" </dev/null >/dev/null 2>&1 &
	wdpid=$!
	rc=0
	while :; do
		wait "$qpid" && rc=0 || rc=$?
		kill -0 "$qpid" 2>/dev/null || break # else wait was interrupted by a signal
	done
	qpid=
	kill "$wdpid" 2>/dev/null || true
	wait "$wdpid" 2>/dev/null || true
	if [ -n "$tailpid" ]; then
		sleep 0.2
		kill "$tailpid" 2>/dev/null || true
		wait "$tailpid" 2>/dev/null || true
	fi
	if [ "$interrupted" = 1 ]; then
		err "interrupted; VM killed"
		exit 130
	fi
	started=0
	! grep -q '^started' "$tmp/status" || started=1
	if [ "$rc" = 124 ]; then
		if [ "$started" = 1 ]; then
			err "timed out after ${timeout}s while the command ran; VM killed"
		else
			err "timed out after ${timeout}s before the command started; VM killed"
		fi
		show_logs
		exit 124
	fi
	status=$(tr -d '\r' <"$tmp/status" | grep -E '^(exit|error)=' | head -n 1) || true
	case "$status" in exit=* | error=*) break ;; esac
	if [ -e "$tmp/frozen" ]; then
		frozen_runs=$((frozen_runs + 1))
		printf 'nested-kvm: warning: the machine froze while the command ran (no heartbeat for %ss; QEMU TCG SVM, docs/linux-guests-nested.md)\n' \
			"$freeze_timeout" >&2
		show_logs
		[ "$frozen_runs" -le "$retry_frozen" ] || { err "the machine froze while the command ran; VM killed"; exit 125; }
		printf 'nested-kvm: warning: running the command again in a new machine (%s/%s)\n' \
			"$((frozen_runs + 1))" "$((retry_frozen + 1))" >&2
		continue
	fi
	how="qemu exit status $rc"
	[ ! -e "$tmp/boot-stalled" ] || how="stopped: no command started after ${boot_timeout}s"
	{ [ "$started" = 0 ] && [ "$attempt" -lt "$max_attempts" ]; } || break
	printf 'nested-kvm: warning: the VM died while booting (%s); retrying (%s/%s)\n' \
		"$how" "$((attempt + 1))" "$max_attempts" >&2
	show_logs
	attempt=$((attempt + 1))
done

case "$status" in
exit=*)
	code=${status#exit=}
	is_uint "$code" || { err "bad status line from the VM: $status"; exit 125; }
	exit "$code"
	;;
error=*)
	err "guest init: ${status#error=}"
	show_logs
	exit 125
	;;
*)
	if [ "$started" = 1 ]; then
		err "the VM stopped while the command ran, without reporting its exit status (qemu exit status $rc)"
	else
		err "the VM died while booting, $attempt attempt(s) ($how)"
	fi
	show_logs
	exit 125
	;;
esac
