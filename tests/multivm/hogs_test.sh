#!/usr/bin/env bash
# --hogs: N busy host threads for the run get CPU time, and the report says
# how much. Natively (no KVM needed): 2 lock threads and 1 hog on CPU 0 for
# 0.5 s; the hog competes at equal priority, so it should get about a third
# of the CPU. Asserted: at least 5% (other work on a shared CI host may take
# CPU 0 too), and no more than its wall time.
source "$(dirname "$0")/common.sh"
"$LOCKVISOR" run --native --workload lockbench --vcpus 2 --pcpus 0 --duration 0.5 --hogs 1 \
  --json "$work/native.json" > "$work/log" 2>&1 || fail "exit $?: $(tail -3 "$work/log")"
grep -q '^hogs: 1 on host CPUs 0 got' "$work/log" || fail "no hogs line: $(cat "$work/log")"
check_json "$work/native.json" '
h = d["hogs"]
assert h["count"] == 1 and h["pcpus"] == "0" and h["per_hog"][0]["cpu"] == 0, h
assert h["wall_s"] >= 0.5, h
assert 0.05 * h["wall_s"] <= h["cpu_seconds"] <= h["wall_s"] * 1.01, h
assert abs(h["cpu_share"] - h["cpu_seconds"] / h["wall_s"]) < 1e-9, h
'
echo "hogs: ok"
