#!/usr/bin/env bash
# lab compare: a lab against itself has every median inside its own interval
# (exit 0) and a wall time from its results; a point whose throughput was
# made 1000 times larger is named as outside (exit 1); what the two labs'
# plans differ in is said; a metric is named as summary.csv names it or by
# its column's name (jain or jain_median); bad input is one line with exit 2.
source "$(dirname "$0")/lab_test_common.sh"

"$LOCKVISOR" lab --scenario "$work/scenario.toml" --out "$work/a" >/dev/null
"$LOCKVISOR" lab compare "$work/a" "$work/a" > "$work/same.md" || fail "a lab against itself: exit $?"
grep -q "^ops_per_sec: 4 of 4 medians of the other lab inside the base's 95% interval\.$" "$work/same.md" ||
  fail "a lab against itself: $(cat "$work/same.md")"
grep -Eq "^Base: .* 20 runs, wall time [0-9]+\.[0-9] s\." "$work/same.md" || fail "no wall time: $(head -5 "$work/same.md")"
grep -q "differ in" "$work/same.md" && fail "the same lab said to differ"

# A copy of lab A in DIR whose results each go through the Python statement
# EDIT (on `r`, one result line).
copy_lab() {  # DIR EDIT
  mkdir "$1"
  cp "$work/a/lab.json" "$1/"
  /usr/bin/python3 -c 'import json, sys
with open(sys.argv[1]) as src, open(sys.argv[2], "w") as dst:
    for line in src:
        r = json.loads(line)
        exec(sys.argv[3])
        dst.write(json.dumps(r) + "\n")' "$work/a/results.jsonl" "$1/results.jsonl" "$2"
}

# One point's runs 1000 times faster: outside, and only that one.
copy_lab "$work/b" 'if r["key"] == "vcpus=2,lock=tas": r["report"]["ops_per_sec"] *= 1000'
set +e
"$LOCKVISOR" lab compare "$work/a" "$work/b" --metric ops_per_sec --metric jain > "$work/changed.md"
code=$?
set -e
[ "$code" = 1 ] || fail "a changed point: exit $code, expected 1"
grep -q "^ops_per_sec: 3 of 4 medians .*; outside: vcpus=2,lock=tas\.$" "$work/changed.md" ||
  fail "the changed point is not named: $(grep '^ops_per_sec:' "$work/changed.md")"
grep -q "^jain: 4 of 4 medians" "$work/changed.md" || fail "jain did not change: $(grep '^jain:' "$work/changed.md")"
grep -Eq "^\| vcpus=2,lock=tas \| .* \| 1000\.00 \| \*\*no\*\* \|$" "$work/changed.md" || fail "no row for the point"
# summary.csv's column name for a median (jain_median) names the metric too.
set +e
"$LOCKVISOR" lab compare "$work/a" "$work/b" --metric ops_per_sec_median --metric jain_median > "$work/columns.md"
set -e
diff <(grep -v '^Other:\|^Base:\|^# ' "$work/changed.md") <(grep -v '^Other:\|^Base:\|^# ' "$work/columns.md") >/dev/null ||
  fail "--metric jain_median did not compare what --metric jain does: $(diff "$work/changed.md" "$work/columns.md")"

# Another plan: said, and the points still compared by key.
"$LOCKVISOR" lab --scenario "$work/scenario.toml" --set duration_s=0.03 --out "$work/c" >/dev/null
set +e
"$LOCKVISOR" lab compare "$work/a" "$work/c" > "$work/other.md"
set -e
grep -q "The two labs differ in --set (none against duration_s=0.03)" "$work/other.md" ||
  fail "the --set difference is not said: $(head -6 "$work/other.md")"
grep -Eq "^ops_per_sec: [0-9] of 4 medians" "$work/other.md" || fail "points of another plan not compared"

# Results of a version without finished_at: the wall time is n/a, the rest works.
copy_lab "$work/old" 'del r["finished_at"]'
"$LOCKVISOR" lab compare "$work/a" "$work/old" > "$work/old.md" || fail "old results: exit $?"
grep -q "wall time n/a (results without finished_at)" "$work/old.md" || fail "old results: $(head -5 "$work/old.md")"

expect_usage() {  # EXPECTED-TEXT ARGS...
  local want=$1
  shift
  set +e
  "$LOCKVISOR" lab compare "$@" > "$work/out" 2> "$work/err"
  local code=$?
  set -e
  [ "$code" = 2 ] || fail "lab compare $*: exit $code, expected 2"
  [ "$(wc -l < "$work/err")" = 1 ] || fail "lab compare $*: not one line: $(cat "$work/err")"
  grep -qF -- "$want" "$work/err" || fail "lab compare $*: '$(cat "$work/err")' does not say '$want'"
}
expect_usage "no lab.json here: not a lab directory" "$work/a" "$work/nowhere"
expect_usage "--metric bogus: not a summary.csv metric (one of: ops_per_sec," "$work/a" "$work/a" --metric bogus
expect_usage "--metric jain_lo: not a summary.csv metric" "$work/a" "$work/a" --metric jain_lo
expect_usage "other is required" "$work/a"
echo "lab compare: ok"
