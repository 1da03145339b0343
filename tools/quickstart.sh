#!/usr/bin/env bash
# The main job: install what is missing, build, then on the local KVM run the
# hypercall conformance suite and an overcommitted ping-pong (8 vCPUs on one
# host CPU) with its per-vCPU statistics.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tools/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default
tools/with-kvm.sh sh -c '
  ./build/default/vmm/lockvisor conformance --pingpong-rounds "${LOCKVISOR_PINGPONG_ROUNDS:-100000}" &&
  ./build/default/vmm/lockvisor run --workload pingpong --vcpus 8 --pcpus 0 --rounds 20000'
