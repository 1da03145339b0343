#!/usr/bin/env bash
# A lab directory is input to `lab report`, `lab compare` and `lab merge`:
# a lab.json or a results.jsonl line that is not what a lab writes is one
# line on stderr naming the file (and line) and the key, exit 2, for each of
# the three; a refused merge leaves no OUT behind, so the same merge with good
# inputs then runs, and its messages name its own OUT, not --out or --resume.
source "$(dirname "$0")/lab_test_common.sh"

"$LOCKVISOR" lab --scenario "$work/scenario.toml" --repeats 2 --out "$work/a" >/dev/null

# A copy of lab A in DIR: lab.json through the Python statement EDIT_M (on
# `m`), each result line through EDIT_R (on `r`, the line's record, and `i`,
# its index).
copy_lab() {  # DIR EDIT_M EDIT_R
  mkdir "$1"
  /usr/bin/python3 -c 'import json, sys
src, dst, edit_m, edit_r = sys.argv[1:]
m = json.load(open(src + "/lab.json"))
exec(edit_m)
json.dump(m, open(dst + "/lab.json", "w"))
with open(src + "/results.jsonl") as lines, open(dst + "/results.jsonl", "w") as out:
    for i, line in enumerate(lines):
        r = json.loads(line)
        exec(edit_r)
        out.write(json.dumps(r) + "\n")' "$work/a" "$1" "$2" "$3"
}

# Every command that reads DIR refuses it: exit 2, one line holding WANT.
expect_refused() {  # DIR WANT
  local dir=$1 want=$2 code
  for command in "report $dir" "compare $work/a $dir" "merge $work/m $dir"; do
    set +e
    # shellcheck disable=SC2086
    "$LOCKVISOR" lab $command > /dev/null 2> "$work/err"
    code=$?
    set -e
    [ "$code" -eq 2 ] || fail "lab $command: exit code $code, not 2: $(cat "$work/err")"
    [ "$(wc -l < "$work/err")" -eq 1 ] || fail "lab $command: stderr is not one line: $(cat "$work/err")"
    grep -qF -- "$want" "$work/err" || fail "lab $command: '$(cat "$work/err")' does not say '$want'"
    grep -q "internal error" "$work/err" && fail "lab $command: $(cat "$work/err")"
    [ ! -e "$work/m" ] || fail "lab $command: a refused merge left $work/m behind"
  done
  return 0
}

n=0
case_of() {  # WANT EDIT_M EDIT_R
  n=$((n + 1))
  copy_lab "$work/bad$n" "$2" "$3"
  expect_refused "$work/bad$n" "$1"
}
case_of "bad1/lab.json: expected a JSON object (a lab's manifest), not array" 'm = []' ''
case_of "bad2/lab.json: repeats: expected a whole number, not -1" 'm["repeats"] = -1' ''
case_of "bad3/lab.json: no 'scenario_text'" 'del m["scenario_text"]' ''
case_of "bad4/lab.json: placement.host_cpus: '3-1'" 'm["placement"]["host_cpus"] = "3-1"' ''
case_of "bad5/results.jsonl:3: no 'report'" '' 'if i == 2: del r["report"]'
case_of "bad6/results.jsonl:2: point vcpus=1,lock=tas#r0: '/ops_per_sec' in its run report is negative" \
  '' 'if i == 1: r["report"]["ops_per_sec"] = -5'
case_of "bad7/results.jsonl:1: point vcpus=1,lock=ticket#r0: '/fairness/jain' in its run report is not a number" \
  '' 'if i == 0: r["report"]["fairness"]["jain"] = "high"'
case_of "bad8/results.jsonl:4: outcome: \"explode\": not an outcome of a point" '' 'if i == 3: r["outcome"] = "explode"'
case_of "bad9/results.jsonl:2: repeat: -1: expected a whole number 0..1" '' 'if i == 1: r["repeat"] = -1'
case_of "bad10/results.jsonl:2: index: 99: expected a whole number 0..7" '' 'if i == 1: r["index"] = 99'
case_of "bad11/results.jsonl:1: point 'vcpus=9,lock=tas#r0' is not part of this lab" '' 'if i == 0: r["id"] = "vcpus=9,lock=tas#r0"'

# A refused merge made nothing; with good inputs the same OUT then works.
"$LOCKVISOR" lab --scenario "$work/scenario.toml" --repeats 2 --shard 1/2 --out "$work/s1" >/dev/null
"$LOCKVISOR" lab --scenario "$work/scenario.toml" --repeats 2 --shard 2/2 --out "$work/s2" >/dev/null
cp -r "$work/s2" "$work/s2bad"
sed -i '$ s/"outcome": *"completed"/"outcome": "explode"/' "$work/s2bad/results.jsonl"
set +e
"$LOCKVISOR" lab merge "$work/m" "$work/s1" "$work/s2bad" > /dev/null 2> "$work/err"
code=$?
set -e
[ "$code" -eq 2 ] && grep -q "s2bad/results.jsonl:4: outcome" "$work/err" || fail "bad shard: exit $code, $(cat "$work/err")"
[ ! -e "$work/m" ] || fail "a refused merge left $(ls "$work/m") behind"
"$LOCKVISOR" lab merge "$work/m" "$work/s1" "$work/s2" > /dev/null || fail "the merge after a refused one"
[ "$(ids_of "$work/m/results.jsonl")" = "$(ids_of "$work/a/results.jsonl")" ] || fail "merged shards != the lab"
# Merging into a directory that is not empty names merge's OUT.
set +e
"$LOCKVISOR" lab merge "$work/m" "$work/s1" "$work/s2" > /dev/null 2> "$work/err"
code=$?
set -e
[ "$code" -eq 2 ] && grep -qF "lab merge: OUT $work/m: exists and is not empty" "$work/err" ||
  fail "merge into a full OUT: exit $code, $(cat "$work/err")"
grep -qE -- "--out|--resume" "$work/err" && fail "merge names options it does not have: $(cat "$work/err")"
echo "lab directory input: ok"
