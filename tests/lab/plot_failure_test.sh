#!/usr/bin/env bash
# When tools/lab-plot.py runs and fails for a reason of its own (figures it
# cannot draw: one run of 1e308 acquisitions/s gives it an infinite axis), `lab report`
# says the script's own error from logs/lab-plot.log, not the advice to
# install matplotlib, which is there.
source "$(dirname "$0")/lab_test_common.sh"
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  [ "${CI:-}" = true ] && fail "no matplotlib for /usr/bin/python3 under CI=true"
  echo "SKIP: /usr/bin/python3 has no matplotlib"
  exit 77
fi

"$LOCKVISOR" lab --scenario "$work/scenario.toml" --repeats 2 --out "$work/a" >/dev/null
/usr/bin/python3 -c 'import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
for r in lines:
    if r["index"] == 1:
        r["report"]["ops_per_sec"] = 1e308
open(sys.argv[1], "w").write("".join(json.dumps(r) + "\n" for r in lines))' "$work/a/results.jsonl"
"$LOCKVISOR" lab report "$work/a" > /dev/null 2> "$work/err" || fail "lab report: exit $?: $(cat "$work/err")"
last=$(grep -v '^\s*$' "$work/a/logs/lab-plot.log" | tail -1)
[ -n "$last" ] && ! grep -q "matplotlib" <<< "$last" || fail "the plot script did not fail on its own: $last"
grep -qF "$last" "$work/err" || fail "the warning does not give the script's error '$last': $(cat "$work/err")"
grep -q "needs /usr/bin/python3 with matplotlib" "$work/err" && fail "install advice for a script error: $(cat "$work/err")"
grep -qF "$last" "$work/a/report.md" || fail "report.md does not give the script's error"
echo "plot failure: ok"
