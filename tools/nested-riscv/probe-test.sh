#!/usr/bin/env bash
# The ctest of the nested RISC-V machine (tests/CMakeLists.txt,
# LOCKVISOR_NESTED_RISCV=ON): builds kvm-probe, runs it with run.sh and checks
# that every check passed and the status came back; then runs it in the mode
# that fails on a stock kernel and checks that run.sh returns the probe's own
# non-zero status with the failing line. The first run builds the kernel.
#
# Usage: probe-test.sh WORK_DIR
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=${1:?usage: probe-test.sh WORK_DIR}
fail() { printf 'probe-test: FAIL: %s\n' "$*" >&2; exit 1; }
mkdir -p "$work" || fail "cannot create $work"
bin=$("$here/build-probe.sh" "$work/bin") || fail "build-probe.sh failed"
probe=$bin/kvm-probe
"$here/prepare.sh" >/dev/null || fail "prepare.sh failed"

"$here/run.sh" --smp 2 --timeout 300 --workdir "$work" -- "$probe" >"$work/pass.out" 2>"$work/pass.err"
rc=$?
cat "$work/pass.out"
[ "$rc" = 0 ] || fail "run.sh -- kvm-probe exited $rc: $(cat "$work/pass.err")"
for line in 'ok: KVM_GET_API_VERSION is 12' 'ok: KICK_CPU at alias EID' \
	'ok: the guest resumed after the ecall' 'ok: KICK_CPU at EID 0x50564c4b makes no exit' \
	'ok: KICK_CPU at EID 0x50564c4b returns a0 -2' 'kvm-probe: all checks passed'; do
	grep -qF "$line" "$work/pass.out" || fail "no line '$line' in the probe's output"
done
! grep -q '^FAIL' "$work/pass.out" || fail "a check failed"

# A stock 6.1 kernel answers EID "PVLK" itself: the probe fails, run.sh must say so.
"$here/run.sh" --smp 1 --timeout 300 --workdir "$work" -- "$probe" --expect-forwarded >"$work/fail.out" 2>"$work/fail.err"
rc=$?
[ "$rc" = 1 ] || fail "run.sh -- kvm-probe --expect-forwarded exited $rc, want the probe's 1: $(cat "$work/fail.err")"
grep -qF 'FAIL: KICK_CPU at EID 0x50564c4b exits to userspace' "$work/fail.out" ||
	fail "no failing line in: $(cat "$work/fail.out")"
echo "probe-test: the probe passes, and its failure reaches run.sh's exit status"
