#!/usr/bin/env bash
# Native points under --inject, and native twins that only a VM can run:
# - a lab of native points with periodic, random, holder and waiter
#   schedules runs them (the threads are parked: each result counts its parks);
# - `lab --native` leaves out the twins `run` refuses natively (a modelled
#   remote-node cost, several VMs), names them with that reason, and keeps
#   every other twin.
source "$(dirname "$0")/lab_test_common.sh"

cat > "$work/inject.toml" <<'TOML'
name = "native-inject"
repeats = 1
[fixed]
workload = "lockbench"
lock = "tas"
vcpus = 2
pcpus = "0"
duration_s = 0.05
native = true
[[axis]]
name = "inject"
values = [
  { label = "periodic", inject = "periodic:vcpu=all,every=10ms,for=1ms,count=2" },
  { label = "random", inject = "random:vcpu=all,rate=200,for=500us" },
  { label = "holder", inject = "holder:lock=0,every=100,for=20us" },
  { label = "waiter", inject = "waiter:lock=0,every=10,for=20us" },
]
TOML
"$LOCKVISOR" lab --scenario "$work/inject.toml" --out "$work/inject" > "$work/log" 2>&1 ||
  fail "native lab with --inject: exit code $?: $(tail -3 "$work/log")"
/usr/bin/python3 - "$work/inject/results.jsonl" <<'PY' || fail "injected parks not in the results"
import json, sys
seen = set()
for line in open(sys.argv[1]):
    r = json.loads(line)
    assert r["outcome"] == "completed", r["id"]
    threads = r["report"]["injected_preemptions"]["threads"]
    assert len(threads) == 2, r["id"]
    kind = r["id"].split("inject=")[1].split("#")[0]
    for t in threads:
        assert kind in t["by_kind"], (r["id"], t)
        if kind == "periodic":
            assert t["by_kind"]["periodic"]["count"] <= 2, t
        if kind in ("holder", "waiter"):
            k = t["by_kind"][kind]
            assert k["points"] == k["count"] and k["points"] <= k["events"], t
        if kind == "holder":
            assert t["by_kind"]["holder"]["events"] > 0, t
    seen.add(kind)
assert seen == {"periodic", "random", "holder", "waiter"}, seen
PY

# numa: its model-500ns twins are the guest's alone; waiter-preemption: every twin.
LOCKVISOR_HOST_CPUS=0-1 "$LOCKVISOR" lab --preset numa --native --dry-run > "$work/numa" 2> "$work/err" ||
  fail "numa --native --dry-run: exit code $?: $(cat "$work/err")"
if grep 'mode=native#' "$work/numa" | grep -q 'remote=model-500ns'; then
  fail "a model-500ns native twin is planned: $(grep 'mode=native#' "$work/numa" | grep -m1 'remote=model-500ns')"
fi
grep -q 'mode=native#r0 *lockvisor run .*--native' "$work/numa" || fail "no native twin left: $(tail -2 "$work/numa")"
grep -q "Native twins left out (only a VM runs them): 12 points, e.g. .*the modelled cost is the guest's" "$work/numa" ||
  fail "the left-out twins are not named: $(tail -1 "$work/numa")"
# Every --inject kind runs natively: waiter-preemption keeps all its twins.
LOCKVISOR_HOST_CPUS=0-1 "$LOCKVISOR" lab --preset waiter-preemption --native --dry-run > "$work/waiter" 2> "$work/err" ||
  fail "waiter-preemption --native --dry-run: exit code $?: $(cat "$work/err")"
guest=$(grep -c 'mode=guest#' "$work/waiter") || true
native=$(grep -c 'mode=native#' "$work/waiter") || true
[ "$native" -gt 0 ] && [ "$native" -eq "$guest" ] || fail "waiter-preemption: $guest guest points, $native native"
! grep -q "Native twins left out" "$work/waiter" || fail "a waiter twin left out: $(tail -1 "$work/waiter")"
echo "native twins: ok"
