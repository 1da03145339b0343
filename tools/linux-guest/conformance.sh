#!/usr/bin/env bash
# Linux as a client of the PV lock ABI: `lockvisor conformance --linux` with
# Debian's two kernels (the cases: `lockvisor conformance --linux K --list`,
# vmm/conformance/linux_cases.cpp). One line per case (PASS/FAIL/N/A), exit
# 0 when every case passed, 1 otherwise.
#
# Runs where Linux guests can run: hardware KVM or inside tools/nested-kvm
# (there with `run.sh --smp 1`: see docs/linux-guests-nested.md).
#
# Usage: conformance.sh [LOCKVISOR]   (default: build/default/vmm/lockvisor)
# Kernels: $LOCKVISOR_LINUX_KERNELS/{amd64,cloud-amd64}
#          (tools/linux-guest/fetch-kernels.sh puts them there).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lv=${1:-$here/../../build/default/vmm/lockvisor}
kernels=${LOCKVISOR_LINUX_KERNELS:-/var/cache/lockvisor/linux-kernels}
for flavour in amd64 cloud-amd64; do
	[ -r "$kernels/$flavour" ] || { echo "conformance: no kernel at $kernels/$flavour (run tools/linux-guest/fetch-kernels.sh)"; exit 1; }
done
exec "$lv" conformance --linux "$kernels/amd64" --linux-cloud "$kernels/cloud-amd64"
