#!/usr/bin/env bash
# A lab killed with SIGKILL mid-run (and left with a torn last line) and then
# resumed ends with exactly the points of an uninterrupted run: none lost,
# none twice.
source "$(dirname "$0")/lab_test_common.sh"

"$LOCKVISOR" lab --scenario "$work/scenario.toml" --out "$work/full" >/dev/null
[ "$(ids_of "$work/full/results.jsonl")" = "$(matrix_ids)" ] || fail "the uninterrupted run is not the matrix"

for kill_after in 2 7; do
  out="$work/killed-$kill_after"
  "$LOCKVISOR" lab --scenario "$work/scenario.toml" --out "$out" >/dev/null &
  pid=$!
  for _ in $(seq 1 1000); do
    n=0
    [ -f "$out/results.jsonl" ] && n=$(wc -l < "$out/results.jsonl")
    [ "$n" -ge "$kill_after" ] && break
    sleep 0.01
  done
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
  n=$(wc -l < "$out/results.jsonl")
  [ "$n" -lt 20 ] || fail "the lab finished before the SIGKILL ($n points)"
  # As if the SIGKILL had cut the next point's write short.
  printf '{"id":"vcpus=2,lock=tas#r4","outcome":"compl' >> "$out/results.jsonl"
  "$LOCKVISOR" lab --scenario "$work/scenario.toml" --out "$out" --resume > "$work/resume.log"
  grep -q "dropped a torn last line" "$work/resume.log" || fail "the torn line was not reported"
  [ "$(ids_of "$out/results.jsonl")" = "$(ids_of "$work/full/results.jsonl")" ] ||
    fail "killed after $n points and resumed: the points differ from an uninterrupted run"
  [ -z "$(ids_of "$out/results.jsonl" | uniq -d)" ] || fail "a point was recorded twice"
  for f in summary.csv summary.md report.md; do [ -s "$out/$f" ] || fail "no $f"; done
done

# Resuming a finished lab runs nothing; a resume with another scenario is refused.
"$LOCKVISOR" lab --scenario "$work/scenario.toml" --out "$work/full" --resume > "$work/again.log"
grep -q " 0 to run" "$work/again.log" || fail "resuming a finished lab ran points"
sed 's/repeats = 5/repeats = 6/' "$work/scenario.toml" > "$work/other.toml"
set +e
"$LOCKVISOR" lab --scenario "$work/other.toml" --out "$work/full" --resume 2> "$work/err"
code=$?
set -e
[ "$code" -eq 2 ] && [ "$(wc -l < "$work/err")" -eq 1 ] || fail "resume with another scenario: exit $code, $(cat "$work/err")"
echo "resume: ok"
