#!/usr/bin/env bash
# Shards run by GNU parallel (on localhost through --sshlogin, as the README
# shows for several hosts) and merged give exactly the unsharded point set;
# merging a shard twice is refused.
source "$(dirname "$0")/lab_test_common.sh"
command -v parallel >/dev/null || fail "GNU parallel is missing (tools/install-deps.sh installs it)"

parallel --will-cite --sshlogin 2/: \
  "$LOCKVISOR" lab --scenario "$work/scenario.toml" --shard {}/3 --out "$work/shard-{}" ::: 1 2 3 >/dev/null
"$LOCKVISOR" lab merge "$work/merged" "$work/shard-1" "$work/shard-2" "$work/shard-3" >/dev/null
[ "$(ids_of "$work/merged/results.jsonl")" = "$(matrix_ids)" ] || fail "merged shards != the matrix"
for i in 1 2 3; do
  [ "$(ids_of "$work/shard-$i/results.jsonl")" != "$(matrix_ids)" ] || fail "shard $i ran everything"
done
for f in summary.csv summary.md report.md; do [ -s "$work/merged/$f" ] || fail "no merged $f"; done

set +e
"$LOCKVISOR" lab merge "$work/twice" "$work/shard-1" "$work/shard-1" 2> "$work/err"
code=$?
set -e
[ "$code" -eq 2 ] && grep -q "is in both" "$work/err" || fail "duplicate merge: exit $code, $(cat "$work/err")"
echo "shard+merge: ok"
