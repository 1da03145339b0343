#!/usr/bin/env bash
# The lab with Linux guests, end to end: a slice of preset linux-two-guests
# (two Debian kernels side by side, a fair-lock guest beside the unfair
# test-and-set one, 1 repeat, 2 of its points) on host CPU 0, then checks
# that every run completed, each VM's row has a throughput and KVM's halt
# count, and the report and trade-off plot were written. Exit 0 when all
# holds, 1 otherwise, with one line saying what did not.
#
# Runs where Linux guests can run: hardware KVM or inside tools/nested-kvm
# (there with `run.sh --smp 1`: docs/linux-guests-nested.md). The result
# directory must be on a path the nested machine shares (the working
# directory is; /tmp is not).
#
# Usage: lab-check.sh [LOCKVISOR] [OUT]   (default: build/default/vmm/lockvisor,
#        build/linux-lab-check; OUT is replaced)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lv=${1:-$here/../../build/default/vmm/lockvisor}
out=${2:-$here/../../build/linux-lab-check}
kernel=${LOCKVISOR_LINUX_KERNELS:-/var/cache/lockvisor/linux-kernels}/amd64
[ -r "$kernel" ] || { echo "lab-check: no kernel at $kernel (run tools/linux-guest/fetch-kernels.sh)"; exit 1; }
rm -rf "$out"
start=$(date +%s)
if ! "$lv" lab --preset linux-two-guests --kernel "$kernel" --set pcpus=0 --repeats 1 --shard 1/4 --out "$out" \
	>"$out.log" 2>&1; then
	echo "FAIL  lab-linux-two-guests: lockvisor lab failed:"
	tail -n 15 "$out.log" | sed 's/^/      | /'
	exit 1
fi
python3 - "$out" "$(($(date +%s) - start))" <<'PY'
import csv, json, os, sys
out, seconds = sys.argv[1], sys.argv[2]
problems = []
records = [json.loads(l) for l in open(os.path.join(out, "results.jsonl")) if l.strip()]
if len(records) != 2:
    problems.append(f"{len(records)} results, expected 2")
for r in records:
    if r["outcome"] != "completed":
        problems.append(f"{r['id']}: {r['outcome']}")
    for vm in r["report"].get("vms", []):
        lx = (vm.get("result") or {}).get("linux") or {}
        want = "tas" if vm["label"] == "unfair" else r["axes"]["fair_lock"]
        if lx.get("guest_spinlock") != want:
            problems.append(f"{r['id']} VM {vm['label']}: the kernel chose {lx.get('guest_spinlock')}, expected {want}")
# The summary lists every point of the matrix; this shard ran two of them.
rows = [r for r in csv.DictReader(open(os.path.join(out, "summary.csv"))) if r["runs"] != "0"]
vms = sorted(r["axis_vm"] for r in rows)
if vms != ["fair", "fair", "unfair", "unfair"]:
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
