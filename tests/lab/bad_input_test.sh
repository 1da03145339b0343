#!/usr/bin/env bash
# Bad scenarios, unknown axis values and a non-empty --out without --resume:
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
sed 's/values = \[1, 2\]/values = [1, 999]/' "$work/scenario.toml" > "$work/badvcpus.toml"
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
echo "bad input: ok"
