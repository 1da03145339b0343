#!/usr/bin/env bash
# What a VM's own run refuses on this host once it starts (an --image that is
# no guest, a --serial that is a directory, a --trace that is no regular
# file) is said as a single run says it: one line on stderr naming the --vm,
# exit code 2, and no report of VMs that never ran.
source "$(dirname "$0")/common.sh"
require_kvm
expect_refused() {  # EXPECTED-TEXT ARGS...
  local want=$1
  shift
  set +e
  "$LOCKVISOR" run --workload lockbench --duration 0.2 "$@" > "$work/out" 2> "$work/err"
  local code=$?
  set -e
  [ "$code" = 2 ] || fail "$*: exit code $code, expected 2: $(cat "$work/err") $(tail -3 "$work/out")"
  [ "$(wc -l < "$work/err")" = 1 ] || fail "$*: not one line: $(cat "$work/err")"
  grep -qF -- "$want" "$work/err" || fail "$*: '$(cat "$work/err")' does not say '$want'"
  ! grep -q "VMs side by side ===" "$work/out" || fail "$*: a report of VMs that never ran: $(cat "$work/out")"
}
expect_refused "lockvisor: error: --vm 1 'label=a,image=/bin/ls': guest image" --vm label=a,image=/bin/ls --vm label=b
expect_refused "lockvisor: error: --vm 1 'label=a,serial=$work': --serial $work: is a directory" \
  --vm "label=a,serial=$work" --vm label=b
expect_refused "lockvisor: error: --vm 2 'label=b,trace=/dev/null': --trace /dev/null" --vm label=a --vm label=b,trace=/dev/null
echo "child refusals: ok"
