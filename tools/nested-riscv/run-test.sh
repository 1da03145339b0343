#!/usr/bin/env bash
# The ctest of run.sh's promises (tests/CMakeLists.txt, LOCKVISOR_NESTED_RISCV=ON),
# each checked with run-check inside the nested RISC-V machine: COMMAND's exit
# status (and 128 + signal, 127 not found, 126 not riscv64), the environment
# passed and the one not passed, the workdir written through to the host, the
# rest of the host read-only, /tmp showing the host's files but keeping no
# writes, --timeout (124) and freeze detection with --retry-frozen (125).
#
# Usage: run-test.sh WORK_DIR
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=${1:?usage: run-test.sh WORK_DIR}
fail() { printf 'run-test: FAIL: %s\n' "$*" >&2; exit 1; }
mkdir -p "$work" || fail "cannot create $work"
work=$(cd "$work" && pwd -P)
bin=$("$here/build-probe.sh" "$work/bin") || fail "build-probe.sh failed"
check=$bin/run-check
"$here/prepare.sh" >/dev/null || fail "prepare.sh failed"

# run WANT_STATUS [run.sh options] -- ARGS...: output in $work/out, stderr in $work/err.
run() {
	local want=$1 rc
	shift
	"$here/run.sh" --workdir "$work" "$@" >"$work/out" 2>"$work/err"
	rc=$?
	[ "$rc" = "$want" ] || fail "run.sh $* exited $rc, want $want: $(tail -n 5 "$work/err")"
}
has() { grep -qxF "$1" "$work/out" || fail "no line '$1' in: $(cat "$work/out")"; }

run 3 -- "$check" exit 3
run 134 --smp 2 -- "$check" abort
run 127 -- "$work/no-such-program"
run 126 -- /bin/true
grep -qF 'Exec format error' "$work/out" || fail "an x86 program's failure is not named: $(cat "$work/out")"

LOCKVISOR_X="a b'c" NOT_PASSED=1 run 0 --env EXTRA=1 -- "$check" env LOCKVISOR_X EXTRA NOT_PASSED LOCKVISOR_OUTER_HOST
has "LOCKVISOR_X=a b'c"
has "EXTRA=1"
has "NOT_PASSED unset"
has "cwd=$work"
grep -q '^LOCKVISOR_OUTER_HOST=vendor=.*;kvm=' "$work/out" || fail "no LOCKVISOR_OUTER_HOST: $(cat "$work/out")"

rm -f "$work/written"
run 0 -- "$check" write written
[ "$(cat "$work/written" 2>/dev/null)" = "written inside" ] || fail "a write to the workdir did not reach the host"
run 1 -- "$check" write /etc/lockvisor-nested-riscv-test

host_tmp=$(mktemp "${TMPDIR:-/tmp}/nested-riscv-test.XXXXXX") || fail "mktemp failed"
trap 'rm -f "$host_tmp"' EXIT
echo "from the host" >"$host_tmp"
run 0 -- "$check" cat "$host_tmp"
has "from the host"
[ "${TMPDIR:-/tmp}" != /tmp ] || {
	run 0 -- "$check" write "$host_tmp"
	[ "$(cat "$host_tmp")" = "from the host" ] || fail "a write to /tmp inside reached the host"
}

run 124 --timeout 5 -- "$check" hang
grep -qF 'timed out after 5s while the command ran' "$work/err" || fail "no timeout message: $(cat "$work/err")"

LOCKVISOR_NESTED_FREEZE_TIMEOUT=10 run 125 --retry-frozen 1 -- "$check" freeze
[ "$(grep -c '^stopping every process$' "$work/out")" = 2 ] || fail "the frozen command did not run twice: $(cat "$work/out")"
grep -qF 'running the command again in a new machine (2/2)' "$work/err" || fail "no retry message: $(cat "$work/err")"
grep -qF 'error: the machine froze while the command ran' "$work/err" || fail "no freeze error: $(cat "$work/err")"
echo "run-test: every promise of run.sh held"
