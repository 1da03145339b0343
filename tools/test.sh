#!/usr/bin/env bash
# The whole test suite:
#   1. default build: host-only tests (unit, CLI, native lock stress);
#   2. ThreadSanitizer build: the native lock stress tests again;
#   3. AddressSanitizer + UndefinedBehaviorSanitizer build: unit and CLI tests;
#   4. the tests that boot guests (ctest label "kvm"), default build and then
#      the ASan build, on this host's KVM or inside tools/nested-kvm.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tools/install-deps.sh
jobs=$(nproc)

cmake --preset default >/dev/null
cmake --build --preset default
ctest --preset default -LE kvm -j "$jobs"

cmake --preset tsan >/dev/null
cmake --build --preset tsan --target lockvisor_native_lock_tests
ctest --preset tsan -R 'Lock|Qspin|Pv|Policy|Registry|Workload|Native|Negative' -LE 'kvm|unit' -j "$jobs"

cmake --preset asan >/dev/null
cmake --build --preset asan --target lockvisor lockvisor_unit_tests lockvisor_cli_tests \
  lockvisor_conformance_tests lockvisor_guest_lock_tests lockvisor_guest_image_tests
ctest --preset asan -L unit -j "$jobs"

# One nested VM (when needed) for both kvm runs; the ASan pass uses fewer
# ping-pong rounds: it checks memory safety of the same paths, not endurance.
tools/with-kvm.sh sh -c 'ctest --preset default -L kvm --output-on-failure &&
  LOCKVISOR_PINGPONG_ROUNDS=5000 ctest --preset asan -L kvm --output-on-failure'
