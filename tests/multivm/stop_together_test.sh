#!/usr/bin/env bash
# Stopped together: SIGTERM to the parent mid-run gives a report for both VMs
# (each ends as "interrupted" with its own run report) and exit code 130;
# one VM failing (its watchdog fires) stops the other, the report names the
# one that failed, and the exit code is the failed VM's (4, timeout), not
# the 130 of the VM stopped because of it.
source "$(dirname "$0")/common.sh"
require_kvm
mkdir "$work/tmp"
TMPDIR="$work/tmp" "$LOCKVISOR" run --workload lockbench --pcpus 0 --vcpus 2 --duration 20 \
  --vm label=a,lock=ticket --vm label=b,lock=unfair --json "$work/term.json" > "$work/term.log" 2>&1 &
pid=$!
# Mid-run: each child prints its "lockvisor run: workload ..." line once its
# VM is built, just before the start gate (its log is in the parent's private
# directory under TMPDIR). Building takes ~0.1 s on PVM, seconds in nested
# KVM: wait for both lines (at most 60 s), then let the guests run 0.5 s.
for _ in $(seq 1 600); do
  built=$(cat "$work"/tmp/lockvisor-vms.*/vm*.log 2>/dev/null | grep -c '^lockvisor run: workload' || true)
  [ "$built" = 2 ] && break
  sleep 0.1
done
[ "$built" = 2 ] || fail "the VMs were not built within 60 s: $(cat "$work"/tmp/lockvisor-vms.*/vm*.log)"
sleep 0.5
kill -TERM "$pid"
set +e
wait "$pid"
code=$?
set -e
[ "$code" = 130 ] || fail "exit code $code after SIGTERM, expected 130: $(tail -5 "$work/term.log")"
for vm in a b; do
  grep -q "^VM $vm: interrupted" "$work/term.log" || fail "no line for VM $vm: $(grep -v '^\[' "$work/term.log" | tail -8)"
done
check_json "$work/term.json" '
assert d["exit_code"] == 130 and d["failure"] == "stopped by SIGTERM", (d["exit_code"], d["failure"])
assert [v["label"] for v in d["vms"]] == ["a", "b"]
for v in d["vms"]:
    assert v["outcome"] == "interrupted", v["outcome"]
    assert v["result"]["outcome"] == "interrupted", v["result"]["outcome"]
    assert v["result"]["wall_seconds"] > 0.2, ("stopped before it ran", v["result"]["wall_seconds"])
    assert v["result"]["wall_seconds"] < 15, ("not stopped", v["result"]["wall_seconds"])
'
set +e
# The short VM's watchdog fires: a ping-pong of more rounds than it can play
# in 0.5 s (a lock workload's --timeout must outlast its --duration).
"$LOCKVISOR" run --workload lockbench --pcpus 0 --vcpus 2 \
  --vm label=short,workload=pingpong,rounds=1000000000,timeout=0.5 --vm label=long,duration=20 \
  --json "$work/fail.json" > "$work/fail.log" 2>&1
code=$?
set -e
[ "$code" = 4 ] || fail "exit code $code when one VM timed out, expected 4: $(tail -5 "$work/fail.log")"
grep -q "^outcome: VM 'short' failed: timeout" "$work/fail.log" || fail "outcome line: $(tail -2 "$work/fail.log")"
check_json "$work/fail.json" '
vms = {v["label"]: v for v in d["vms"]}
assert vms["short"]["outcome"] == "timeout" and vms["short"]["stopped_by"] is None, vms["short"]["outcome"]
assert vms["long"]["stopped_by"] == "stopped because VM '"'"'short'"'"' failed", vms["long"]["stopped_by"]
assert vms["long"]["result"]["wall_seconds"] < 10, vms["long"]["result"]["wall_seconds"]
'
echo "stop together: ok"
