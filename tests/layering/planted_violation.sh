#!/bin/sh
# The layering check must catch what the module map forbids, in a copy of the
# tree: an upward include in guest/ (the guest including the VMM), one inside
# vmm/, a VMM include of guest code its row does not grant, a permission no
# file uses, a folder without a row and a row that lets the guest include the
# VMM. The unchanged copy must pass first, so each failure is the plant's.
set -eu
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { python3 "$root/tools/check-layers.py" "$tmp"; }
cp -R "$root/docs" "$root/guest" "$root/hypercalls" "$root/vmm" "$tmp/"
design=$tmp/docs/design.md

# Runs the check, which must exit with $1 and print the line $2.
expect() {
  set +e
  out=$(check)
  rc=$?
  set -e
  echo "$out"
  [ "$rc" -eq "$1" ] || { echo "expected exit $1, got $rc"; exit 1; }
  echo "$out" | grep -qxF "$2" || { echo "expected the line: $2"; exit 1; }
}

check >/dev/null || { echo "the unchanged copy of the tree does not pass"; check; exit 1; }

# guest -> vmm: the guest is built without the VMM.
printf '#pragma once\n#include "vmm/machine/machine.h"\n' >"$tmp/guest/runtime/planted.h"
expect 1 'guest/runtime/planted.h:2: guest/runtime may not include vmm/machine'
rm "$tmp/guest/runtime/planted.h"

# Upward inside vmm/: util is the bottom layer.
printf '#pragma once\n\n#include "vmm/machine/machine.h"\n' >"$tmp/vmm/util/planted.h"
expect 1 'vmm/util/planted.h:3: vmm/util may not include vmm/machine'
rm "$tmp/vmm/util/planted.h"

# vmm -> guest code its row does not grant, through the guest's include root.
printf '#include "runtime/boot.h"\n' >"$tmp/vmm/metrics/planted.cpp"
expect 1 'vmm/metrics/planted.cpp:1: vmm/metrics may not include guest/runtime'
rm "$tmp/vmm/metrics/planted.cpp"

# A permission nothing uses.
cp "$design" "$tmp/design.md"
sed -i 's/^\(| vmm\/control | .* | \)vmm\/machine, /\1vmm\/kvm, vmm\/machine, /' "$design"
expect 1 'vmm/control may include vmm/kvm, but none of its files does'
cp "$tmp/design.md" "$design"

# A row that lets the guest include the VMM is refused, whatever uses it.
sed -i 's/^\(| guest\/runtime | .* | \)guest\/locks, /\1vmm\/util, guest\/locks, /' "$design"
expect 2 'check-layers: guest/runtime may include vmm/util: guest/ is built without vmm/'
cp "$tmp/design.md" "$design"

# A folder with no row.
mkdir "$tmp/vmm/newfolder"
printf '#pragma once\n' >"$tmp/vmm/newfolder/x.h"
expect 2 'check-layers: vmm/newfolder/ has no row in the module map'
