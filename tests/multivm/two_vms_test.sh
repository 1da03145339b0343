#!/usr/bin/env bash
# Two VMs on host CPU 0 for 0.3 s: two result sets with the right locks and
# vCPU counts, both released by the same start time, neither entering its
# guest before it, and their first guest entries within 50 ms of each other;
# the parent's host CPU hog (--hogs 1, CPU 0) got CPU time beside them.
#
# Why 50 ms: the gate hands every child one start time and each sleeps until
# it, so what is left is the wake-up of the children's main threads and of
# their first vCPU thread on a CPU the other guest's vCPUs already share: a
# few scheduler slices (EEVDF's base slice is 3 ms here, 5 threads on CPU 0).
# Measured 0.1-25 ms on a 2-CPU PVM host loaded by other builds; building a
# VM takes ~100 ms (first entry after process start), so without the gate
# the starts would differ by the children's spawn and build times instead.
source "$(dirname "$0")/common.sh"
require_kvm
"$LOCKVISOR" run --workload lockbench --pcpus 0 --duration 0.3 \
  --vm label=fair,lock=ticket,vcpus=2 --vm label=unfair,lock=unfair,vcpus=3 \
  --hogs 1 --json "$work/out.json" > "$work/log" 2>&1 || fail "exit $?: $(tail -5 "$work/log")"
grep -q '^=== VM fair' "$work/log" || fail "no text report for VM fair"
grep -q '^=== VM unfair' "$work/log" || fail "no text report for VM unfair"
check_json "$work/out.json" '
vms = {v["label"]: v for v in d["vms"]}
assert list(vms) == ["fair", "unfair"], list(vms)
assert d["exit_code"] == 0 and d["failure"] is None, d["failure"]
for label, lock, vcpus in (("fair", "ticket", 2), ("unfair", "unfair", 3)):
    r = vms[label]["result"]
    assert vms[label]["outcome"] == "completed", vms[label]
    assert r["lock"] == lock and r["vcpus"] == vcpus, (label, r["lock"], r["vcpus"])
    assert r["ops_total"] > 0 and len(r["per_vcpu_ops"]) == vcpus, r["per_vcpu_ops"]
    assert r["vm"]["config"]["pcpus"] == "0", r["vm"]["config"]["pcpus"]
starts = {v["result"]["start_gate"]["start_monotonic_ns"] for v in d["vms"]}
assert len(starts) == 1, starts
start = starts.pop()
entries = [v["result"]["start_gate"]["first_entry_monotonic_ns"] for v in d["vms"]]
assert all(e >= start for e in entries), ("a guest ran before the start time", start, entries)
skew_ms = (max(entries) - min(entries)) / 1e6
assert abs(d["start_skew_ms"] - skew_ms) < 1e-6, (d["start_skew_ms"], skew_ms)
assert skew_ms < 50, "first guest entries %.1f ms apart" % skew_ms
h = d["hogs"]
assert h["count"] == 1 and h["per_hog"][0]["cpu"] == 0 and h["wall_s"] >= 0.3, h
assert h["cpu_seconds"] > 0.01 * h["wall_s"], ("the hog got no CPU time", h)
print("start skew %.2f ms, hog %.3f CPU-s" % (skew_ms, h["cpu_seconds"]))
'
echo "two VMs: ok"
