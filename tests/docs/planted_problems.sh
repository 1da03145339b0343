#!/bin/sh
# The docs check must catch what it exists for: in a small copy of the tree,
# a link to a missing file, an anchor no heading has, a path in code that names
# nothing, and a test folder the README's list leaves out each fail it, by
# name; the copy as made passes.
set -eu
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs" "$tmp/tests/alpha" "$tmp/tools"
: >"$tmp/tools/run.sh"
cat >"$tmp/README.md" <<'MD'
# Top

See [the guide](docs/guide.md#how-it-works) and `[not a link](nowhere.md)`; run `tools/run.sh` (or `tools/NAME`).

<!-- test-folders -->
- `tests/alpha/`: the alpha tests
<!-- /test-folders -->
MD
cat >"$tmp/docs/guide.md" <<'MD'
# Guide

## How it works

Back to [the top](../README.md#top).
```text
[inside a code block](missing.md)
```
MD
check() { set +e; out=$(python3 "$root/tools/dev/check-docs.py" "$tmp"); rc=$?; set -e; echo "$out"; }
check
[ "$rc" -eq 0 ] || { echo "expected the planted tree to pass, got $rc"; exit 1; }

printf 'A [broken link](docs/gone.md).\n' >>"$tmp/README.md"
check
[ "$rc" -eq 1 ] || { echo "expected exit 1 for a broken link, got $rc"; exit 1; }
echo "$out" | grep -q '^README.md:8: no file docs/gone.md$' || { echo "broken link not named"; exit 1; }

sed -i '$d' "$tmp/README.md"
sed -i 's/#how-it-works/#how-it-fails/' "$tmp/README.md"
check
[ "$rc" -eq 1 ] || { echo "expected exit 1 for a missing anchor, got $rc"; exit 1; }
echo "$out" | grep -q '^README.md:3: no heading #how-it-fails in docs/guide.md$' || { echo "missing anchor not named"; exit 1; }

sed -i 's/#how-it-fails/#how-it-works/' "$tmp/README.md"
mv "$tmp/tools/run.sh" "$tmp/tools/start.sh"
check
[ "$rc" -eq 1 ] || { echo "expected exit 1 for a path that names nothing, got $rc"; exit 1; }
echo "$out" | grep -q '^README.md:3: no tools/run.sh in the tree$' || { echo "stale path not named"; exit 1; }

mv "$tmp/tools/start.sh" "$tmp/tools/run.sh"
mkdir "$tmp/tests/beta"
check
[ "$rc" -eq 1 ] || { echo "expected exit 1 for an unlisted test folder, got $rc"; exit 1; }
echo "$out" | grep -q '^README.md: test folder tests/beta/ is not in the test-folder list$' || { echo "unlisted folder not named"; exit 1; }
