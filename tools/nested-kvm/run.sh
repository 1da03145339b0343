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
#   --verbose         kernel log and guest init messages on stderr
# Exit status: COMMAND's; 124 on timeout; 125 if the VM failed to run it.
# A VM that dies while booting, before COMMAND started, is retried twice.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

err() { printf 'nested-kvm: error: %s\n' "$*" >&2; }
usage_error() {
	err "$*"
	printf 'usage: %s [--smp N] [--mem MiB] [--timeout SECS] [--workdir DIR] [--env NAME[=VAL]] [--verbose] -- COMMAND [ARGS...]\n' "$0" >&2
	exit 2
}
is_uint() { case "$1" in '' | *[!0-9]*) return 1 ;; esac }

smp=1
mem=1024
timeout=600
workdir=.
verbose=0
extra_env=()
while [ $# -gt 0 ]; do
	case "$1" in
	--smp | --mem | --timeout | --workdir | --env)
		[ $# -ge 2 ] || usage_error "$1 needs a value"
		case "$1" in
		--smp) smp=$2 ;;
		--mem) mem=$2 ;;
		--timeout) timeout=$2 ;;
		--workdir) workdir=$2 ;;
		--env) extra_env+=("$2") ;;
		esac
		shift 2
		;;
	--smp=* | --mem=* | --timeout=* | --workdir=* | --env=*)
		set -- "${1%%=*}" "${1#*=}" "${@:2}"
		;;
	-v | --verbose) verbose=1; shift ;;
	-h | --help) sed -n '2,17s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
	--) shift; break ;;
	-*) usage_error "unknown option $1" ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || usage_error "no command given"
{ is_uint "$smp" && [ "$smp" -ge 1 ]; } || usage_error "--smp needs a positive integer"
{ is_uint "$mem" && [ "$mem" -ge 128 ]; } || usage_error "--mem needs an integer >= 128 (MiB)"
is_uint "$timeout" || usage_error "--timeout needs a non-negative integer (seconds)"
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
attempt=1
while :; do
	: >"$tmp/console.log"
	: >"$tmp/status"
	tailpid=
	if [ "$verbose" = 1 ]; then
		tail -n +1 -f "$tmp/console.log" >&2 &
		tailpid=$!
	fi
	timeout --signal=TERM --kill-after=10 "$timeout" "${qemu[@]}" </dev/null 2>"$tmp/qemu.err" &
	qpid=$!
	rc=0
	while :; do
		wait "$qpid" && rc=0 || rc=$?
		kill -0 "$qpid" 2>/dev/null || break # else wait was interrupted by a signal
	done
	qpid=
	if [ -n "$tailpid" ]; then
		sleep 0.2
		kill "$tailpid" 2>/dev/null || true
		wait "$tailpid" 2>/dev/null || true
	fi
	if [ "$interrupted" = 1 ]; then
		err "interrupted; VM killed"
		exit 130
	fi
	if [ "$rc" = 124 ]; then
		err "timed out after ${timeout}s; VM killed"
		exit 124
	fi
	started=0
	! grep -q '^started' "$tmp/status" || started=1
	status=$(tr -d '\r' <"$tmp/status" | grep -v '^started$' | head -n 1) || true
	case "$status" in exit=* | error=*) break ;; esac
	{ [ "$started" = 0 ] && [ "$attempt" -lt "$max_attempts" ]; } || break
	printf 'nested-kvm: warning: the VM died while booting (qemu exit status %s); retrying (%s/%s)\n' \
		"$rc" "$((attempt + 1))" "$max_attempts" >&2
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
		err "the VM died while booting, $attempt attempt(s) (qemu exit status $rc)"
	fi
	show_logs
	exit 125
	;;
esac
