#!/usr/bin/env bash
# The whole test suite: host-only tests natively (default preset, then the
# unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer), and
# the tests that boot guests (ctest label "kvm") on the local KVM, or inside
# tools/nested-kvm where this machine has none.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tools/install-deps.sh
jobs=$(nproc)

cmake --preset default >/dev/null
cmake --build --preset default
ctest --preset default -LE kvm -j "$jobs"

cmake --preset asan >/dev/null
cmake --build --preset asan --target lockvisor_unit_tests lockvisor_cli_tests lockvisor
ctest --preset asan -L unit -j "$jobs"

tools/with-kvm.sh ctest --preset default -L kvm --output-on-failure
