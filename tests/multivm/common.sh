# Shared by the multi-VM command-line tests. Sourced; $1 of the test is lockvisor.
set -euo pipefail
LOCKVISOR=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# Tests that boot guests: skipped (exit 77) without a usable /dev/kvm, a failure under CI=true.
require_kvm() {
  if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
    [ "${CI:-}" = true ] && fail "no usable /dev/kvm under CI=true"
    echo "SKIP: no usable /dev/kvm"
    exit 77
  fi
}
# check_json FILE PYTHON: runs PYTHON with `d` = the parsed FILE; an assert failing fails the test.
check_json() { /usr/bin/python3 -c "import json,sys
d = json.load(open(sys.argv[1]))
$2" "$1" || fail "check of $1 (see above)"; }
