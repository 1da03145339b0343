#!/usr/bin/env bash
# Bad scenarios, unknown axis values, bad host-CPU words and a non-empty --out without --resume:
# one line on stderr and exit code 2, before anything runs.
source "$(dirname "$0")/lab_test_common.sh"

expect_usage() {  # expect_usage WHAT ARGS...
  local what=$1
  shift
  set +e
  # A bound: a lab that reads a device forever fails the test instead of hanging it.
  timeout 60 "$LOCKVISOR" lab "$@" > /dev/null 2> "$work/err"
  local code=$?
  set -e
  [ "$code" -eq 2 ] || fail "$what: exit code $code, not 2"
  [ "$(wc -l < "$work/err")" -eq 1 ] || fail "$what: stderr is not one line: $(cat "$work/err")"
}

mkdir -p "$work/nonempty" && touch "$work/nonempty/x"
expect_usage "non-empty --out" --scenario "$work/scenario.toml" --out "$work/nonempty"
sed 's/"tas"/"tas", "nosuchlock"/' "$work/scenario.toml" > "$work/badlock.toml"
expect_usage "unknown lock" --scenario "$work/badlock.toml" --out "$work/a"
grep -q nosuchlock "$work/err" || fail "the unknown lock is not named"
[ ! -e "$work/a" ] || fail "an --out was made for a bad scenario"
sed 's/values = \[1, 2\]/values = [1, 100000]/' "$work/scenario.toml" > "$work/badvcpus.toml"
expect_usage "vcpus out of range" --scenario "$work/badvcpus.toml" --dry-run
printf 'name = "x"\n[[axis]\n' > "$work/broken.toml"
expect_usage "broken TOML" --scenario "$work/broken.toml" --out "$work/b"
expect_usage "missing file" --scenario "$work/none.toml" --out "$work/c"
expect_usage "unknown preset" --preset nosuch --out "$work/d"
expect_usage "bad shard" --scenario "$work/scenario.toml" --shard 4/3 --out "$work/e"
# A scenario is a regular file of at most 1 MiB: a device, a directory or a
# huge file is refused before anything is read or run.
expect_usage "a device as scenario" --scenario /dev/zero --out "$work/f"
grep -q "/dev/zero: not a regular file" "$work/err" || fail "/dev/zero: $(cat "$work/err")"
expect_usage "a directory as scenario" --scenario "$work" --out "$work/g"
grep -q "not a regular file" "$work/err" || fail "directory: $(cat "$work/err")"
{ cat "$work/scenario.toml"; head -c 1100000 /dev/zero | tr '\0' '#'; } > "$work/huge.toml"
expect_usage "a scenario over 1 MiB" --scenario "$work/huge.toml" --out "$work/h"
grep -q "larger than 1024 KiB" "$work/err" || fail "huge: $(cat "$work/err")"
[ ! -e "$work/f" ] && [ ! -e "$work/h" ] || fail "an --out was made for an unreadable scenario"
# Host CPUs in words: an empty or malformed --pcpus is one line and exit 2
# before anything runs, on `run` as in a lab's --set.
for bad in "" "bogus" "9999cpus"; do
  set +e
  "$LOCKVISOR" run --native --workload lockbench --lock tas --duration 0.02 --pcpus "$bad" > /dev/null 2> "$work/err"
  code=$?
  set -e
  [ "$code" -eq 2 ] || fail "run --pcpus '$bad': exit code $code, not 2"
  [ "$(wc -l < "$work/err")" -eq 1 ] || fail "run --pcpus '$bad': stderr is not one line: $(cat "$work/err")"
  # An empty value is refused by the command line's one empty-value check.
  if [ -z "$bad" ]; then expect="--pcpus: the value is empty"; else expect="host CPUs '$bad'"; fi
  grep -qF -- "$expect" "$work/err" || fail "run --pcpus '$bad': $(cat "$work/err")"
done
grep -q "usable" "$work/err" || fail "a count above the usable CPUs: $(cat "$work/err")"
expect_usage "a bad pcpus word in --set" --scenario "$work/scenario.toml" --set pcpus=bogus --dry-run
grep -q "a fraction of the usable CPUs (1/2, 50%)" "$work/err" || fail "bad word: $(cat "$work/err")"
expect_usage "--host-cpus without --dry-run" --scenario "$work/scenario.toml" --host-cpus 0-15 --out "$work/i"
expect_usage "--host-cpus that is no list" --scenario "$work/scenario.toml" --host-cpus all --dry-run
# Side by side: 1-CPU points, two at a time, each result naming its CPU.
"$LOCKVISOR" lab --scenario "$work/scenario.toml" --set pcpus=1cpu --repeats 2 --jobs 2 --out "$work/jobs" > /dev/null
/usr/bin/python3 - "$work/jobs" <<'PY' || fail "--jobs 2: results"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1] + "/results.jsonl")]
assert len(lines) == 8, len(lines)
assert all(l["outcome"] == "completed" and l["cpus"] in ("0", "1") for l in lines), lines
placement = json.load(open(sys.argv[1] + "/lab.json"))["placement"]
assert {"setting": "pcpus", "word": "1cpu", "resolved": "0"} in placement["terms"], placement
PY
grep -q "## Placement" "$work/jobs/report.md" || fail "report.md has no Placement section"
# The scenario's description keeps its own figures; both reports say under it
# what this lab changed (its --set and --repeats).
for f in summary.md report.md; do
  grep -qF "*This lab changed the scenario: pcpus=1cpu, 2 repeats per point." "$work/jobs/$f" ||
    fail "$f does not say what the lab changed: $(head -12 "$work/jobs/$f")"
done
echo "bad input: ok"
