#!/usr/bin/env bash
# Bad --vm specs: one line on stderr naming the --vm (and the key where there
# is one), exit code 2, nothing started. No KVM needed: all are refused while
# parsing.
source "$(dirname "$0")/common.sh"
expect_usage() {  # EXPECTED-TEXT ARGS...
  local want=$1
  shift
  set +e
  "$LOCKVISOR" run --workload lockbench "$@" > "$work/out" 2> "$work/err"
  local code=$?
  set -e
  [ "$code" = 2 ] || fail "$*: exit code $code, expected 2"
  [ "$(wc -l < "$work/err")" = 1 ] || fail "$*: not one line: $(cat "$work/err")"
  [ ! -s "$work/out" ] || fail "$*: started something: $(cat "$work/out")"
  grep -qF -- "$want" "$work/err" || fail "$*: '$(cat "$work/err")' does not say '$want'"
}
expect_usage "--vm 2 'lock=ticket,bogus=1': unknown key 'bogus'" --vm lock=ticket --vm lock=ticket,bogus=1
expect_usage "--vm 1 'lock=ticket,vcpus': 'vcpus' is not key=value" --vm lock=ticket,vcpus --vm lock=unfair
expect_usage "--vm 2 'vcpus=0': vcpus=0:" --vm vcpus=1 --vm vcpus=0
expect_usage "--vm 2 'label=x': label 'x' is already another VM's" --vm label=x --vm label=x
expect_usage "--vm 1 'lock=nosuch': lock=nosuch:" --vm lock=nosuch --vm lock=ticket
expect_usage "--vm 1 'no-pv=yes': no-pv=yes: a switch takes true or false" --vm no-pv=yes --vm lock=ticket
expect_usage "--vm 1 'label=a b': label 'a b'" --vm "label=a b" --vm lock=ticket
expect_usage "--vm: the value is empty" --vm lock=ticket --vm ""
expect_usage "unknown key 'json'" --vm json=/tmp/x --vm lock=ticket
expect_usage "--native cannot be combined" --native --vm lock=ticket --vm lock=unfair
expect_usage "--vm 1 'pcpus=0,x': 'x' is not key=value" --vm pcpus=0,x --vm lock=ticket
# A comma inside max(...) belongs to the value: the word is read whole and refused for its list.
expect_usage "--vm 1 'pcpus=max(1cpu,0-1)': pcpus=max(1cpu,0-1): --pcpus: host CPUs 'max(1cpu,0-1)': max() compares words" \
  --vm 'pcpus=max(1cpu,0-1)' --vm lock=ticket
expect_usage "--serial outside --vm" --serial "$work/s" --vm lock=ticket --vm lock=unfair
expect_usage "--vm 2 'serial=$work/s': serial=$work/s: another VM uses that path" --vm "serial=$work/s" --vm "serial=$work/s"
expect_usage "--api outside --vm: every VM would use that socket" --api "$work/sock" --vm lock=ticket --vm lock=unfair
expect_usage "--trace outside --vm: every VM would use that file" --trace "$work/t.json" --vm lock=ticket --vm lock=unfair
expect_usage "--vm 2 'trace=$work/t.json': trace=$work/t.json: another VM uses that path" --vm "trace=$work/t.json" --vm "trace=$work/t.json"
expect_usage "--vm 2 'api=$work/sock': api=$work/sock: another VM uses that path" --vm "api=$work/sock" --vm "api=$work/sock"
expect_usage "--hogs: 999 is out of range 0..256" --hogs 999
echo "bad specs: ok"
