#!/bin/sh
# The layering check must catch an upward include: a copy of the module map
# and a two-folder tree where util (the bottom layer) includes machine.
set -eu
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs" "$tmp/vmm/util" "$tmp/vmm/machine"
cp "$root/docs/design.md" "$tmp/docs/design.md"
printf '#include "vmm/util/error.h"\n' >"$tmp/vmm/machine/ok.cpp"
printf '#pragma once\n#include "vmm/machine/machine.h"\n' >"$tmp/vmm/util/bad.h"
set +e
out=$(python3 "$root/tools/check-layers.py" "$tmp")
rc=$?
set -e
echo "$out"
[ "$rc" -eq 1 ] || { echo "expected exit 1, got $rc"; exit 1; }
echo "$out" | grep -q '^vmm/util/bad.h:2: util may not include machine$' || { echo "violation not named"; exit 1; }
# A folder with no row is refused too.
mkdir -p "$tmp/vmm/newfolder"
rm "$tmp/vmm/util/bad.h"
set +e
python3 "$root/tools/check-layers.py" "$tmp"
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "expected exit 2 for a folder without a row, got $rc"; exit 1; }
