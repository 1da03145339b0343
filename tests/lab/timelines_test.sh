#!/usr/bin/env bash
# The lab's [timeline] (the report shows the timeline of the worst wait of
# each lock): after a small guest matrix, one traced run per
# selected cell. Each leaves a trace windowed on its longest lock wait (no
# wait in the file is longer than the one the window was built around, and
# that one is in it), its swimlane PNG, trace-check's JSON and text beside it,
# a record in timelines.jsonl, and a section in report.md that links them and
# has trace-check's table of acquisitions by path; --resume re-runs only a
# missing one.
# Needs /dev/kvm: skipped (exit 77) without it, a failure under CI=true.
source "$(dirname "$0")/lab_test_common.sh"
require_kvm
guest_scenario timeline 2 tas pvticket pvbounded <<'TOML'
[timeline]
where = { lock = ["tas", "pvbounded"] }
TOML
"$LOCKVISOR" lab --scenario "$work/timeline.toml" --dry-run > "$work/dry" || fail "dry run"
grep -q "then 2 traced runs" "$work/dry" || fail "dry run does not list the traced runs: $(tail -2 "$work/dry")"
# A lock that trace-check judges keeps every acquisition in its trace; the others merge short ones.
grep "lock=tas#timeline" "$work/dry" | grep -q -- "--trace-merge-short" || fail "tas's timeline does not merge"
grep "lock=pvbounded#timeline" "$work/dry" | grep -q -- "--trace-merge-short" && fail "pvbounded's timeline merges"
"$LOCKVISOR" lab --scenario "$work/timeline.toml" --out "$work/out" > "$work/log" 2>&1 || fail "lab: $(tail -3 "$work/log")"
grep -q "2 traced runs" "$work/log" || fail "the lab did not announce 2 traced runs: $(cat "$work/log")"
/usr/bin/python3 - "$work/out" <<'PY' || fail "timeline check"
import json, os, sys
d = sys.argv[1]
runs = [json.loads(l) for l in open(d + "/results.jsonl")]
assert len(runs) == 6 and all(r["outcome"] == "completed" for r in runs), [r["outcome"] for r in runs]
tl = [json.loads(l) for l in open(d + "/timelines.jsonl")]
assert sorted(t["axes"]["lock"] for t in tl) == ["pvbounded", "tas"], tl
report = open(d + "/report.md").read()
assert "## Timelines: each lock's worst wait" in report, report
for t in tl:
    assert t["outcome"] == "completed", t
    trace = json.load(open(os.path.join(d, t["trace"])))
    meta = trace["metadata"]
    window, worst = meta["window"], meta["window"]["worst_wait"]
    assert worst["wait_us"] > 0 and worst["waits_searched"] > 0, worst
    # The file holds only what overlaps the window, and nothing outside it.
    assert window["events_outside"] > 0, window
    waits = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"] == "wait"]
    assert waits, "no lock waits in the window"
    assert max(e["dur"] for e in waits) <= worst["wait_us"] + 0.001, (max(e["dur"] for e in waits), worst)
    assert any(abs(e["dur"] - worst["wait_us"]) < 0.002 and abs(e["ts"] - worst["begin_us"]) < 0.002
               and e["tid"] == 2000 + worst["vcpu"] for e in waits), worst
    for e in trace["traceEvents"]:
        if e.get("ph") == "X":
            assert e["ts"] <= window["end_us"] + 0.001 and e["ts"] + e["dur"] >= window["begin_us"] - 0.001, e
    png = os.path.splitext(t["trace"])[0] + ".png"
    assert os.path.getsize(os.path.join(d, png)) > 10000, png
    assert "](%s)" % png in report and "](%s)" % t["trace"] in report, png
    # Beside it: the measured runs' worst wait of the same cell, and what
    # trace-check finds in the traced run, kept as its JSON and text.
    section = report[report.index("### lock=%s\n" % t["axes"]["lock"]):].split("###")[1]
    assert "Measured runs (2): worst wait" in section, section[:400]
    stem = os.path.splitext(t["trace"])[0]
    check = json.load(open(os.path.join(d, stem + ".check.json")))
    # pvbounded's is judged by the oracle, from every acquisition; tas's is not.
    judged = t["axes"]["lock"] == "pvbounded"
    assert check["vcpus"] == 4 and check["bound"]["judged"] == judged, check["bound"]
    assert not judged or check["merged_slices"] == 0, check["merged_slices"]
    assert ("pvbounded's bound oracle" in section) == judged, section
    locks = check["locks"]
    assert locks and sum(p["acquisitions"] for p in locks[0]["paths"].values()) == locks[0]["acquisitions"], locks
    assert "lock 0 time:" in open(os.path.join(d, stem + ".check.txt")).read()
    assert "[JSON](%s.check.json)" % stem in section, section
    assert "- Lock 0: %d acquisitions" % locks[0]["acquisitions"] in section, section
    for path, p in locks[0]["paths"].items():
        assert "  | %s | %d (" % (path, p["acquisitions"]) in section, (path, section)
PY
# A missing timeline (its record gone) runs again on --resume, and only it.
head -n 1 "$work/out/timelines.jsonl" > "$work/one" && mv "$work/one" "$work/out/timelines.jsonl"
"$LOCKVISOR" lab --resume --out "$work/out" > "$work/log2" 2>&1 || fail "resume: $(tail -3 "$work/log2")"
grep -q "1 traced run " "$work/log2" || fail "resume did not run exactly one traced run: $(cat "$work/log2")"
[ "$(wc -l < "$work/out/timelines.jsonl")" = 2 ] || fail "timelines.jsonl after resume: $(cat "$work/out/timelines.jsonl")"
# --no-timelines: none.
"$LOCKVISOR" lab --scenario "$work/timeline.toml" --out "$work/none" --repeats 1 --no-timelines > "$work/log3" 2>&1 ||
  fail "no-timelines: $(tail -3 "$work/log3")"
[ ! -e "$work/none/timelines.jsonl" ] || fail "--no-timelines still traced"
grep -q "No traced runs yet" "$work/none/report.md" || fail "report without timelines does not say so"
echo "lab timelines: ok"
