#!/usr/bin/env bash
# Bad scenarios (a setting given twice, a value of the wrong type, a matrix
# too large), unknown axis values, bad host-CPU words, a non-empty --out
# without --resume and a scenario edited before --resume: one line on stderr
# naming the file and line where there is one, exit code 2, before anything runs.
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
# A setting is given in one place: [fixed] and an axis of it, or --set twice,
# would have one value silently win.
expect_said() {  # WANT: the one line of the last expect_usage says it
  grep -qF -- "$1" "$work/err" || fail "'$(cat "$work/err")' does not say '$1'"
}
scenario_with() {  # FILE TOML: the test scenario with TOML added to [fixed]
  sed "s/^\[fixed\]$/[fixed]\n$2/" "$work/scenario.toml" > "$work/$1"
}
scenario_with twice.toml 'lock = "ticket"'
expect_usage "[fixed] and an axis set one setting" --scenario "$work/twice.toml" --dry-run
expect_said "twice.toml:12: the setting 'lock' is given twice: by [fixed] at $work/twice.toml:4 and by axis 'lock'"
expect_usage "--set twice" --scenario "$work/scenario.toml" --set duration_s=1 --set duration_s=2 --dry-run
expect_said "--set duration_s: given twice (duration_s=1 and duration_s=2)"
# Values of the wrong type or form, an outcome no point has, a name that is
# no name: the file and line.
scenario_with string.toml 'cs_ns = "100"'
expect_usage "a string where a number is due" --scenario "$work/string.toml" --dry-run
expect_said "string.toml:4: cs_ns = \"100\": expected a number, not a string"
sed 's/pcpus = "0"/pcpus = "3-1"/' "$work/scenario.toml" > "$work/backwards.toml"
expect_usage "a CPU list that runs backwards" --scenario "$work/backwards.toml" --dry-run
expect_said "backwards.toml:7: pcpus: bad CPU list '3-1'"
sed 's/pcpus = "0"/vcpus = true/; s/name = "vcpus"/name = "cs_ns"/' "$work/scenario.toml" > "$work/bool.toml"
expect_usage "vcpus = true" --scenario "$work/bool.toml" --dry-run
expect_said "bool.toml:7: vcpus = true: expected a number or a word"
expect_usage "--host-cpus 3-1" --scenario "$work/scenario.toml" --host-cpus 3-1 --dry-run
expect_said "--host-cpus: bad CPU list '3-1'"
{ cat "$work/scenario.toml"; printf '[[claim]]\nkind = "outcome"\ntext = "c"\noutcome = "explode"\nexpect = "some"\n'; } \
  > "$work/outcome.toml"
expect_usage "a claim's unknown outcome" --scenario "$work/outcome.toml" --dry-run
expect_said "outcome.toml:17: claim outcome \"explode\": not an outcome of a point (completed,"
for name in '""' '"a/b"' '"a\\nb"'; do
  sed "s|^name = \"lab-test\"|name = $name|" "$work/scenario.toml" > "$work/name.toml"
  expect_usage "name = $name" --scenario "$work/name.toml" --dry-run
  expect_said "name.toml:1: name "
  expect_said ": 1-64 characters of A-Z a-z 0-9 _ . -"
done
# An empty file is said to be one, whatever else is given.
: > "$work/empty.toml"
expect_usage "an empty scenario" --scenario "$work/empty.toml" --out "$work/j"
expect_said "--scenario $work/empty.toml: the file is empty"
# A matrix too large to plan is refused from its size, at once.
{
  printf 'name = "huge"\n[fixed]\nworkload = "lockbench"\nnative = true\n'
  for axis in cs_ns delay_ns seed hogs; do
    printf '[[axis]]\nname = "%s"\nvalues = [%s]\n' "$axis" "$(seq -s, 0 31)"
  done
  printf '[[axis]]\nname = "lock"\nvalues = ["tas", "ticket", "qspinlock", "unfair", "pvticket", "pvqspinlock", "hq", "cna"]\n'
} > "$work/huge-matrix.toml"
expect_usage "a matrix of 8.4 M points" --scenario "$work/huge-matrix.toml" --repeats 1 --dry-run
expect_said "scenario 'huge': 8388608 points (32 x 32 x 32 x 32 x 8 axis values x 1 repeat): more than a lab plans (at most 100000)"
# --resume with a scenario file edited since the lab began says so.
"$LOCKVISOR" lab --scenario "$work/scenario.toml" --repeats 1 --out "$work/edited" > /dev/null
cp "$work/scenario.toml" "$work/scenario.orig"
sed -i 's/duration_s = 0.02/duration_s = 0.03/' "$work/scenario.toml"
expect_usage "--resume after an edit" --scenario "$work/scenario.toml" --out "$work/edited" --resume
cp "$work/scenario.orig" "$work/scenario.toml"
expect_said "--resume: $work/scenario.toml has changed since the lab in $work/edited began (line 5 differs"
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
