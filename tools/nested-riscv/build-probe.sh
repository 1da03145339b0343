#!/usr/bin/env bash
# Builds kvm-probe.cpp as a static riscv64 program for the nested RISC-V
# machine (run.sh), with the riscv64 cross compiler and its kernel headers.
#
# Usage: build-probe.sh [OUTPUT]   (default: build/nested-riscv/kvm-probe under
#                                   the repository root); prints OUTPUT.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/build/nested-riscv/kvm-probe}
cxx=riscv64-linux-gnu-g++
command -v "$cxx" >/dev/null 2>&1 ||
	{ echo "nested-riscv build-probe: error: $cxx not found (apt-get install g++-riscv64-linux-gnu)" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
"$cxx" -std=c++20 -O2 -static -Wall -Wextra -Werror -I"$root" -I"$root/hypercalls/include" \
	-o "$out" "$here/kvm-probe.cpp"
printf '%s\n' "$out"
