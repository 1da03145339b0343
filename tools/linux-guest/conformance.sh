#!/usr/bin/env bash
# Linux as a client of the PV lock ABI: boots Debian's kernels on lockvisor
# and checks that each --guest-lock policy makes the kernel choose what it
# should, and that the PV one really halts and kicks through KVM. One line
# per case (PASS/FAIL), exit 0 when every case passed, 1 otherwise.
#
# Runs where Linux guests can run: hardware KVM or inside tools/nested-kvm
# (there with `run.sh --smp 1`: see docs/linux-guests-nested.md).
#
# Usage: conformance.sh [LOCKVISOR]   (default: build/default/vmm/lockvisor)
# Kernels: $LOCKVISOR_LINUX_KERNELS/{amd64,cloud-amd64}
#          (tools/linux-guest/fetch-kernels.sh puts them there).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lv=${1:-$here/../../build/default/vmm/lockvisor}
kernels=${LOCKVISOR_LINUX_KERNELS:-/var/cache/lockvisor/linux-kernels}
out=$(mktemp -d "${TMPDIR:-/tmp}/lockvisor-linux-conformance.XXXXXX")
trap 'rm -rf "$out"' EXIT
failed=0

# case NAME EXPECTED_EXIT CHECK -- lockvisor run arguments...
# CHECK is a Python expression over `r` (the whole report: the workload's
# figures at the top), `l` (its "linux" object: the kernel's choice) and `k`
# (KVM's counts); empty: only the exit code is checked.
case_() {
	local name=$1 want=$2 check=$3
	shift 4
	local json="$out/$name.json" log="$out/$name.log"
	local start end rc
	start=$(date +%s.%N)
	"$lv" run "$@" --json "$json" >"$log" 2>&1
	rc=$?
	end=$(date +%s.%N)
	local why=""
	if [ "$rc" != "$want" ]; then
		why="exit code $rc, expected $want"
	elif [ -n "$check" ]; then
		why=$(python3 - "$json" "$check" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
l = r.get("linux", {})
k = r.get("kvm_totals") or {}
ok = eval(sys.argv[2])
print("" if ok else "check failed: " + sys.argv[2] + " (guest_spinlock=%s, cpus=%s, halt_exits=%s, hypercalls=%s, ops/s=%s)"
      % (l.get("guest_spinlock"), r.get("guest_cpus_online"), k.get("halt_exits"), k.get("hypercalls"), r.get("ops_per_sec")))
PY
)
	fi
	local wall
	wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
	if [ -z "$why" ]; then
		printf 'PASS  %-34s %6s s\n' "$name" "$wall"
	else
		printf 'FAIL  %-34s %6s s  %s\n' "$name" "$wall" "$why"
		tail -n 15 "$log" | sed 's/^/      | /'
		failed=1
	fi
}

for flavour in amd64 cloud-amd64; do
	[ -r "$kernels/$flavour" ] || { echo "conformance: no kernel at $kernels/$flavour (run tools/linux-guest/fetch-kernels.sh)"; exit 1; }
done
k=$kernels/amd64
# PV_UNHALT shown: PV qspinlock, and at 4 vCPUs on one CPU waiters really
# halt and unlockers really kick (KVM counts both).
case_ pv-4-on-1-kicks-and-halts 0 \
	'l["guest_spinlock"] == "pv" and r["guest_cpus_online"] == 4 and k["halt_exits"] > 0 and k["hypercalls"] > 0 and r["ops_per_sec"] > 0' \
	-- --kernel "$k" --vcpus 4 --pcpus 0 --guest-lock pv --workload futex-hash --duration 1
# PV_UNHALT hidden: virt_spin_lock's test-and-set.
case_ tas-when-pv-unhalt-hidden 0 'l["guest_spinlock"] == "tas" and r["ops_per_sec"] > 0' \
	-- --kernel "$k" --vcpus 2 --pcpus 0 --guest-lock tas --workload futex-hash --duration 1
# The realtime hint: the native queued spinlock.
case_ native-with-realtime-hint 0 'l["guest_spinlock"] == "native" and r["ops_per_sec"] > 0' \
	-- --kernel "$k" --vcpus 2 --pcpus 0 --guest-lock native --workload futex-hash --duration 1
# The cloud kernel finds its CPUs through ACPI only.
case_ cloud-kernel-every-cpu-online 0 'r["guest_cpus_online"] == 4 and l["guest_spinlock"] == "pv"' \
	-- --kernel "$kernels/cloud-amd64" --vcpus 4 --pcpus 0 --workload hello
# Bad input: a truncated bzImage is refused before anything runs.
head -c 100000 "$k" >"$out/truncated"
case_ truncated-kernel-refused 2 '' -- --kernel "$out/truncated" --vcpus 1
# A kernel that never reaches its init ends at --timeout (exit 4).
case_ never-reaches-init-times-out 4 '' -- --kernel "$k" --vcpus 1 --append "rdinit=/nonexistent panic=0" --timeout 20
exit $failed
