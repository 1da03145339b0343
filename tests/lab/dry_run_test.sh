#!/usr/bin/env bash
# lab --dry-run lists the points of a Linux preset on any host (it runs
# nothing, so whether this host's KVM can boot a kernel does not matter);
# a real lab of them is still refused where it cannot run: on PVM.
source "$(dirname "$0")/lab_test_common.sh"

# Any file will do: a dry run does not read the kernel.
kernel="$work/bzImage"
: > "$kernel"
"$LOCKVISOR" lab --preset linux-policies --kernel "$kernel" --dry-run > "$work/points" 2> "$work/err" ||
  fail "dry run: exit code $?: $(cat "$work/err")"
[ ! -s "$work/err" ] || fail "dry run wrote to stderr: $(cat "$work/err")"
# Every point (ids NAME#rN) and every traced run boots the kernel given.
points=$(grep -c '#r[0-9]* *lockvisor run ' "$work/points") || fail "no points: $(cat "$work/points")"
if grep "lockvisor run " "$work/points" | grep -v -- "--kernel $kernel" > "$work/without"; then
  fail "a run without --kernel $kernel: $(head -1 "$work/without")"
fi
grep -q "^$points runs (" "$work/points" || fail "the count line does not say $points runs: $(tail -1 "$work/points")"

if "$LOCKVISOR" doctor 2> /dev/null | grep -q "^KVM kind *: PVM"; then
  set +e
  "$LOCKVISOR" lab --preset linux-policies --kernel "$kernel" --out "$work/out" > /dev/null 2> "$work/err"
  code=$?
  set -e
  [ "$code" -eq 2 ] || fail "a real Linux lab on PVM: exit code $code, not 2"
  grep -q "cannot run on this PVM host" "$work/err" || fail "a real Linux lab on PVM: $(cat "$work/err")"
fi
echo "dry run: ok ($points points)"
