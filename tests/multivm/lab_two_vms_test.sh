#!/usr/bin/env bash
# A lab point with two VMs yields two result sets: one summary row per VM
# (column vm), each with its own lock and its own completed runs, and a claim
# along the axis "vm" is checked.
source "$(dirname "$0")/common.sh"
require_kvm
cat > "$work/two.toml" <<'TOML'
name = "two-vms-test"
repeats = 2
[fixed]
workload = "lockbench"
duration_s = 0.2
vcpus = 2
pcpus = "0"
[[vm]]
label = "fair"
lock = "ticket"
[[vm]]
label = "unfair"
lock = "unfair"
vcpus = 3
[[axis]]
name = "cs_ns"
values = [100]
[[claim]]
text = "the claim machinery reaches the vm axis"
metric = "cpu_s"
axis = "vm"
a = "unfair"
b = "fair"
expect = "a~b"
TOML
"$LOCKVISOR" lab --scenario "$work/two.toml" --out "$work/out" > "$work/log" 2>&1 || fail "lab: $(tail -3 "$work/log")"
/usr/bin/python3 - "$work/out" <<'PY' || fail "summary check"
import csv, json, sys
d = sys.argv[1]
runs = [json.loads(l) for l in open(d + "/results.jsonl")]
assert len(runs) == 2, len(runs)
for r in runs:
    assert r["outcome"] == "completed", r["outcome"]
    assert [v["label"] for v in r["report"]["vms"]] == ["fair", "unfair"], r["report"]["vms"]
rows = list(csv.DictReader(open(d + "/summary.csv")))
assert [r["axis_vm"] for r in rows] == ["fair", "unfair"], [r.get("axis_vm") for r in rows]
by_vm = {r["axis_vm"]: r for r in rows}
assert by_vm["fair"]["lock"] == "ticket" and by_vm["unfair"]["lock"] == "unfair", rows
assert by_vm["fair"]["vcpus"] == "2" and by_vm["unfair"]["vcpus"] == "3", rows
for r in rows:
    assert r["runs"] == "2" and r["completed"] == "2", r
    assert float(r["ops_per_sec_median"]) > 0 and r["ops_per_sec_n"] == "2", r
    assert float(r["overcommit"]) == 5.0, r["overcommit"]
summary = open(d + "/summary.md").read()
assert "cs_ns=100: unfair/fair cpu_s" in summary, summary
PY
echo "lab with two VMs: ok"
