#!/usr/bin/env bash
# The lab with Linux guests, end to end: one point of preset
# linux-two-guests (two Debian kernels side by side on host CPU 0, 2 vCPUs
# each, as a one-CPU kernel keeps its native lock: the native-qspinlock guest
# beside the unfair test-and-set one, futex-hash, one run), then checks that the run completed, each kernel chose the lock it was
# given, each VM's summary row has a throughput and KVM's halt count, and the
# report and plot were written. One point, not more: inside tools/nested-kvm
# every minute of two guests side by side risks the emulator's freeze
# (docs/linux-guests-nested.md, section 4). Exit 0 when all
# holds, 1 otherwise, with one line saying what did not.
#
# Runs where Linux guests can run: hardware KVM or inside tools/nested-kvm
# (there with `run.sh --smp 1`: docs/linux-guests-nested.md). The result
# directory must be on a path the nested machine shares (the working
# directory is; /tmp is not).
#
# Usage: linux-lab-check.sh [LOCKVISOR] [OUT]   (default: build/default/vmm/lockvisor,
#        build/linux-lab-check; OUT is replaced). The lab's progress lines are
#        printed as they come; LOCKVISOR_LAB_CHECK_TIMEOUT (seconds, default
#        900) bounds the whole lab, and a lab that fails or outlives it ends
#        with the tail of the log of the point that was running.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lv=${1:-$here/../../build/default/vmm/lockvisor}
out=${2:-$here/../../build/linux-lab-check}
kernel=${LOCKVISOR_LINUX_KERNELS:-/var/cache/lockvisor/linux-kernels}/amd64
[ -r "$kernel" ] || { echo "lab-check: no kernel at $kernel (run tools/linux-guest/fetch-kernels.sh)"; exit 1; }
# The whole check's budget: each point has the lab's own timeout, so a lab
# that outlives this is stuck somewhere else, and the check says where.
budget=${LOCKVISOR_LAB_CHECK_TIMEOUT:-900}
rm -rf "$out" "$out.log"
start=$(date +%s)
# The lab's progress lines as they come (a stall shows which point it is in).
rc=0
timeout --signal=TERM --kill-after=10 "$budget" \
	"$lv" lab --preset linux-two-guests --kernel "$kernel" --set pcpus=0 --set vcpus=2 --repeats 1 --shard 1/8 --out "$out" \
	2>&1 | tee "$out.log" | sed -u 's/^/      | /' || rc=$?
if [ "$rc" != 0 ]; then
	if [ "$rc" = 124 ]; then
		echo "FAIL  lab-linux-two-guests: lockvisor lab did not finish within ${budget} s"
	else
		echo "FAIL  lab-linux-two-guests: lockvisor lab failed (exit $rc)"
	fi
	# The point that was running, or the last one that ran.
	last=$(ls -t "$out"/logs/*.log 2>/dev/null | head -n 1) || true
	if [ -n "$last" ]; then
		echo "      last point's log ($last):"
		tail -n 25 "$last" | sed 's/^/      | /'
	fi
	exit 1
fi
python3 - "$out" "$(($(date +%s) - start))" <<'PY'
import csv, json, os, sys
out, seconds = sys.argv[1], sys.argv[2]
problems = []
records = [json.loads(l) for l in open(os.path.join(out, "results.jsonl")) if l.strip()]
if len(records) != 1:
    problems.append(f"{len(records)} results, expected 1")
for r in records:
    if r["outcome"] != "completed":
        problems.append(f"{r['id']}: {r['outcome']}")
    for vm in r["report"].get("vms", []):
        lx = (vm.get("result") or {}).get("linux") or {}
        want = "tas" if vm["label"] == "unfair" else r["axes"]["fair_lock"]
        if lx.get("guest_spinlock") != want:
            problems.append(f"{r['id']} VM {vm['label']}: the kernel chose {lx.get('guest_spinlock')}, expected {want}")
# The summary lists every point of the matrix; this shard ran one of them.
rows = [r for r in csv.DictReader(open(os.path.join(out, "summary.csv"))) if r["runs"] != "0"]
vms = sorted(r["axis_vm"] for r in rows)
if vms != ["fair", "unfair"]:
    problems.append(f"summary rows by VM: {vms}")
for r in rows:
    for metric in ("ops_per_sec", "kvm_halt_exits"):
        v = r.get(metric + "_median") or ""
        if not v or float(v) <= 0:
            problems.append(f"summary {r['key']}: {metric} is '{v}'")
for f in ("report.md", "summary.md", "throughput.png"):
    if not os.path.exists(os.path.join(out, f)):
        problems.append(f"no {f}")
if problems:
    print("FAIL  lab-linux-two-guests: " + "; ".join(problems))
    sys.exit(1)
print(f"PASS  lab-linux-two-guests {seconds:>22} s")
PY
