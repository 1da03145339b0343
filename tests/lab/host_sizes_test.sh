#!/usr/bin/env bash
# Every preset plans on every host size its users have, 2 to 256 CPUs: a
# point whose host-relative vCPU count is beyond a limit there (a Linux
# guest's 254 vCPUs, a VM's 1024, or the host KVM's fewer) is left out
# and named on the dry run's last line, never the whole lab refused, unless
# every point is beyond one (then one line says so and how to plan smaller).
source "$(dirname "$0")/lab_test_common.sh"

kernel="$work/bzImage"
: > "$kernel"
presets=$("$LOCKVISOR" lab --list | awk '{print $1}')
[ -n "$presets" ] || fail "lab --list printed no preset"
for cpus in 2 16 64 256; do
  for preset in $presets; do
    args=(lab --preset "$preset" --dry-run --host-cpus "0-$((cpus - 1))")
    set +e
    "$LOCKVISOR" "${args[@]}" > "$work/out" 2> "$work/err"
    code=$?
    # A preset that boots Linux needs a kernel file (any will do: nothing runs).
    if [ "$code" -ne 0 ] && grep -q -- "--kernel" "$work/err"; then
      "$LOCKVISOR" "${args[@]}" --kernel "$kernel" > "$work/out" 2> "$work/err"
      code=$?
    fi
    set -e
    if [ "$preset" = linux-two-guests ] && [ "$cpus" -gt 254 ]; then
      # Both guests get every CPU: no point fits a Linux guest's 254 vCPUs.
      [ "$code" -eq 2 ] || fail "$preset on $cpus CPUs: exit $code, not 2"
      grep -q "every point is beyond a limit.*a Linux guest has at most 254 vCPUs.*taskset -c 0-127" "$work/err" ||
        fail "$preset on $cpus CPUs: $(cat "$work/err")"
      continue
    fi
    [ "$code" -eq 0 ] || fail "$preset on $cpus CPUs: exit $code: $(head -c 400 "$work/err")"
    grep -q '^[0-9]* runs (' "$work/out" || fail "$preset on $cpus CPUs: no count line"
  done
done

# What is left out, and why, on the dry run's last line: scaling's 8:1 on 256
# CPUs is 2048 vCPUs, more than a VM has; its 1:1 and 4:1 (256 and 1024) run
# for every lock, pvbounded's word naming every CPU a VM may have.
"$LOCKVISOR" lab --preset scaling --dry-run --host-cpus 0-255 > "$work/out"
last=$(tail -n 1 "$work/out")
for expected in "Left out, their vCPUs beyond a limit on this host (256 CPUs; a VM may have 1024 vCPUs here" \
  '`placement=8:1,lock=ticket` (2048 vCPUs: a VM has at most 1024 vCPUs)' \
  '`placement=8:1,lock=pvbounded` (2048 vCPUs: a VM has at most 1024 vCPUs)'; do
  case "$last" in *"$expected"*) ;; *) fail "scaling on 256 CPUs: the last line lacks '$expected': $last" ;; esac
done
case "$last" in *"4:1"*|*"1:1"*) fail "scaling on 256 CPUs left out a 1:1 or 4:1 point: $last" ;; esac
grep -q "placement=1:1,lock=pvbounded#r0  lockvisor run --workload lockbench --lock pvbounded --vcpus 256 --pcpus 0-255 " "$work/out" ||
  fail "scaling on 256 CPUs lost pvbounded at 1:1"
grep -q "placement=4:1,lock=pvbounded#r0  lockvisor run --workload lockbench --lock pvbounded --vcpus 1024 " "$work/out" ||
  fail "scaling on 256 CPUs lost pvbounded at 4:1"
grep -q "placement=1:1,lock=tas#r0  lockvisor run --workload lockbench --lock tas --vcpus 256 --pcpus 0-255 " "$work/out" ||
  fail "scaling on 256 CPUs lost tas at 1:1"
# On 16 CPUs nothing is beyond a limit: no such line.
"$LOCKVISOR" lab --preset scaling --dry-run --host-cpus 0-15 > "$work/out"
grep -q "beyond a limit" "$work/out" && fail "scaling on 16 CPUs left points out: $(tail -n 1 "$work/out")"
echo "host sizes: ok"
