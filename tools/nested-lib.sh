# shellcheck shell=bash disable=SC2034,SC2154 # globals are the interface (below)
# What the nested machines' run.sh scripts share (sourced, not run): their
# options, the outer host's description, the environment passed to COMMAND,
# and the loop that boots a machine, watches it and turns what it reported
# into run.sh's exit status. tools/nested-kvm/run.sh and
# tools/nested-riscv/run.sh use it.
#
# The caller sets, before sourcing: nested_name (the prefix of every message,
# e.g. nested-riscv) and, where --smp has a limit, max_harts (the largest
# --smp; no limit when unset); optionally qemu_err_noise (nested_show_logs)
# and freeze_hint (nested_run_machine). Then it calls nested_parse_options
# HELP-LAST-LINE "$@", nested_make_tmp and nested_export_outer_host, passes
# nested_command and nested_passed_environment to its init, builds the
# machine into the array `qemu` (whose console goes to $tmp/console.log and
# status port to $tmp/status), and calls nested_run_machine, which never
# returns.

nested_err() { printf '%s: error: %s\n' "$nested_name" "$*" >&2; }
nested_usage_error() {
	nested_err "$*"
	printf 'usage: %s [--smp N] [--mem MiB] [--timeout SECS] [--workdir DIR] [--env NAME[=VAL]] [--retry-frozen N] [--verbose] -- COMMAND [ARGS...]\n' "$0" >&2
	exit 2
}
nested_is_uint() { case "$1" in '' | *[!0-9]*) return 1 ;; esac }

# Sets smp, mem, timeout, workdir (absolute), verbose, extra_env (array),
# retry_frozen, boot_timeout, freeze_timeout and nested_command (array); exits 2 on
# bad input. --help prints the caller's header comment (lines 2 to $1).
nested_parse_options() { # help-last-line args...
	local help_last=$1 spec name
	shift
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
			[ $# -ge 2 ] || nested_usage_error "$1 needs a value"
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
		-h | --help) sed -n "2,${help_last}s/^# \{0,1\}//p" "$0"; exit 0 ;;
		--) shift; break ;;
		-*) nested_usage_error "unknown option $1" ;;
		*) break ;;
		esac
	done
	[ $# -gt 0 ] || nested_usage_error "no command given"
	nested_command=("$@")
	{ nested_is_uint "$smp" && [ "$smp" -ge 1 ]; } || nested_usage_error "--smp needs a positive integer"
	[ -z "${max_harts:-}" ] || [ "$smp" -le "$max_harts" ] || nested_usage_error "--smp must be at most $max_harts"
	{ nested_is_uint "$mem" && [ "$mem" -ge 128 ]; } || nested_usage_error "--mem needs an integer >= 128 (MiB)"
	nested_is_uint "$timeout" || nested_usage_error "--timeout needs a non-negative integer (seconds)"
	nested_is_uint "$retry_frozen" || nested_usage_error "--retry-frozen needs a non-negative integer"
	[ -d "$workdir" ] || nested_usage_error "workdir '$workdir' is not a directory"
	workdir=$(cd -P "$workdir" && pwd -P)
	[ "$workdir" != / ] || nested_usage_error "refusing to export / read-write; choose a --workdir"
	for spec in "${extra_env[@]}"; do
		name=${spec%%=*}
		case "$name" in
		'' | [0-9]* | *[!A-Za-z0-9_]*) nested_usage_error "--env: invalid variable name '$name'" ;;
		esac
	done
	# Seconds a boot may take before the command starts, and seconds without
	# init's 5 s heartbeat after which the machine counts as frozen (its
	# kernel no longer runs); both far above what a loaded host takes.
	boot_timeout=${LOCKVISOR_NESTED_BOOT_TIMEOUT:-300}
	{ nested_is_uint "$boot_timeout" && [ "$boot_timeout" -ge 1 ]; } ||
		nested_usage_error "LOCKVISOR_NESTED_BOOT_TIMEOUT needs a positive integer (seconds)"
	freeze_timeout=${LOCKVISOR_NESTED_FREEZE_TIMEOUT:-90}
	{ nested_is_uint "$freeze_timeout" && [ "$freeze_timeout" -ge 10 ]; } ||
		nested_usage_error "LOCKVISOR_NESTED_FREEZE_TIMEOUT needs an integer >= 10 (seconds)"
}

# Creates the run's scratch directory $tmp, removed at exit, and kills the
# machine ($qpid) if run.sh exits while it runs.
nested_make_tmp() {
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockvisor-$nested_name.XXXXXX")
	qpid=
	trap nested_cleanup EXIT
}
# shellcheck disable=SC2317 # called through the trap
nested_cleanup() {
	[ -z "$qpid" ] || kill -TERM "$qpid" 2>/dev/null || true
	rm -rf "$tmp"
}

# QEMU option values escape ',' as ',,'.
nested_qe() { printf '%s' "${1//,/,,}"; }
# The kernel command line's log options: everything with --verbose.
nested_kernel_log() {
	if [ "$verbose" = 1 ]; then
		printf 'loglevel=7'
	else
		printf 'quiet loglevel=4'
	fi
}

# The outer host, for lockvisor inside to mark its results as emulated and
# name the real machine (vmm/host/emulation.h; it believes the variable only
# on QEMU's emulated CPU). Passed on like every LOCKVISOR_* variable.
nested_export_outer_host() {
	local outer_kvm=none device=${LOCKVISOR_KVM_DEVICE:-/dev/kvm}
	cpuinfo_field() { sed -n "s/^$1[[:space:]]*: //p" /proc/cpuinfo | head -n 1; }
	if [ -r "$device" ] && [ -w "$device" ]; then
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
}

# COMMAND's environment as NAME=VALUE lines ended by NUL bytes: a default
# PATH, then CI, HOME, PATH and every LOCKVISOR_* of this process, then the
# --env variables (last, so that they win).
nested_passed_environment() {
	local name spec
	printf 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\0'
	for name in CI HOME PATH $(compgen -e LOCKVISOR_); do
		[ -z "${!name+x}" ] || printf '%s=%s\0' "$name" "${!name}"
	done
	for spec in "${extra_env[@]}"; do
		name=${spec%%=*}
		if [ "$spec" != "$name" ]; then
			printf '%s\0' "$spec"
		elif [ -n "${!name+x}" ]; then
			printf '%s=%s\0' "$name" "${!name}"
		fi
	done
}

# The guest console from the first panic/oops/init error line if any, else
# its end; and qemu's stderr (without the lines matching $qemu_err_noise).
nested_show_logs() {
	local first
	if [ -s "$tmp/console.log" ]; then
		first=$(grep -n -m 1 -E "Kernel panic|Oops|BUG:|$nested_name init" "$tmp/console.log" | cut -d: -f1) || true
		if [ -n "$first" ]; then
			printf -- '--- guest console (from line %s) ---\n' "$first" >&2
			tail -n "+$first" "$tmp/console.log" | head -n 40 | tr -d '\r' >&2
		else
			printf -- '--- guest console (last 30 lines) ---\n' >&2
			tail -n 30 "$tmp/console.log" | tr -d '\r' >&2
		fi
	fi
	if grep -v -e "${qemu_err_noise:-^$}" "$tmp/qemu.err" 2>/dev/null | grep -q .; then
		printf -- '--- qemu stderr ---\n' >&2
		grep -v -e "${qemu_err_noise:-^$}" "$tmp/qemu.err" | tail -n 30 >&2
	fi
}

# Watches the running VM: stops a boot that has not started the command after
# boot_timeout (marker boot-stalled), and a machine whose heartbeat stopped
# for freeze_timeout while the command ran (marker frozen).
nested_watch_vm() { # qemu-pid
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

# Boots `qemu` until COMMAND has run (a VM that dies before COMMAND started is
# retried twice: nothing has run yet; a frozen one --retry-frozen times), then
# exits with COMMAND's status, or 124 (timeout), 125 (VM failure), 130
# (interrupted). $freeze_hint, if set, follows the freeze warning. Optional
# hooks: nested_on_boot QEMU-PID after each start, nested_on_exit once it ended. The qemu
# process, while it runs, is $qpid (nested_make_tmp's trap kills it).
nested_run_machine() {
	local max_attempts=3 attempt=1 frozen_runs=0 tailpid wdpid rc started status how code
	interrupted=0
	trap 'interrupted=1; [ -z "$qpid" ] || kill -TERM "$qpid" 2>/dev/null || true' INT TERM HUP
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
		# The caller's hook, if any, to follow the machine's output while it runs.
		! declare -F nested_on_boot >/dev/null || nested_on_boot "$qpid"
		nested_watch_vm "$qpid" </dev/null >/dev/null 2>&1 &
		wdpid=$!
		rc=0
		while :; do
			wait "$qpid" && rc=0 || rc=$?
			kill -0 "$qpid" 2>/dev/null || break # else wait was interrupted by a signal
		done
		! declare -F nested_on_exit >/dev/null || nested_on_exit
		qpid=
		kill "$wdpid" 2>/dev/null || true
		wait "$wdpid" 2>/dev/null || true
		if [ -n "$tailpid" ]; then
			sleep 0.2
			kill "$tailpid" 2>/dev/null || true
			wait "$tailpid" 2>/dev/null || true
		fi
		if [ "$interrupted" = 1 ]; then
			nested_err "interrupted; VM killed"
			exit 130
		fi
		started=0
		! grep -q '^started' "$tmp/status" || started=1
		if [ "$rc" = 124 ]; then
			if [ "$started" = 1 ]; then
				nested_err "timed out after ${timeout}s while the command ran; VM killed"
			else
				nested_err "timed out after ${timeout}s before the command started; VM killed"
			fi
			nested_show_logs
			exit 124
		fi
		status=$(tr -d '\r' <"$tmp/status" | grep -E '^(exit|error)=' | head -n 1) || true
		case "$status" in exit=* | error=*) break ;; esac
		if [ -e "$tmp/frozen" ]; then
			frozen_runs=$((frozen_runs + 1))
			printf '%s: warning: the machine froze while the command ran (no heartbeat for %ss%s)\n' \
				"$nested_name" "$freeze_timeout" "${freeze_hint:+; $freeze_hint}" >&2
			nested_show_logs
			[ "$frozen_runs" -le "$retry_frozen" ] ||
				{ nested_err "the machine froze while the command ran; VM killed"; exit 125; }
			printf '%s: warning: running the command again in a new machine (%s/%s)\n' \
				"$nested_name" "$((frozen_runs + 1))" "$((retry_frozen + 1))" >&2
			continue
		fi
		how="qemu exit status $rc"
		[ ! -e "$tmp/boot-stalled" ] || how="stopped: no command started after ${boot_timeout}s"
		{ [ "$started" = 0 ] && [ "$attempt" -lt "$max_attempts" ]; } || break
		printf '%s: warning: the VM died while booting (%s); retrying (%s/%s)\n' \
			"$nested_name" "$how" "$((attempt + 1))" "$max_attempts" >&2
		nested_show_logs
		attempt=$((attempt + 1))
	done

	case "$status" in
	exit=*)
		code=${status#exit=}
		nested_is_uint "$code" || { nested_err "bad status line from the VM: $status"; exit 125; }
		exit "$code"
		;;
	error=*)
		nested_err "guest init: ${status#error=}"
		nested_show_logs
		exit 125
		;;
	*)
		if [ "$started" = 1 ]; then
			nested_err "the VM stopped while the command ran, without reporting its exit status (qemu exit status $rc)"
		else
			nested_err "the VM died while booting, $attempt attempt(s) ($how)"
		fi
		nested_show_logs
		exit 125
		;;
	esac
}
