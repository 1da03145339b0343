#!/usr/bin/env bash
# Builds the static riscv64 programs of this directory for the nested RISC-V
# machine (run.sh), with the riscv64 cross compiler and its kernel headers:
# kvm-probe (kvm-probe.cpp) and run-check (run-check.cpp, for run-test.sh).
#
# Usage: build-probe.sh [DIR]   (default: build/nested-riscv under the
#                                repository root); prints DIR.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/build/nested-riscv}
cxx=riscv64-linux-gnu-g++
command -v "$cxx" >/dev/null 2>&1 ||
	{ echo "nested-riscv build-probe: error: $cxx not found (apt-get install g++-riscv64-linux-gnu)" >&2; exit 1; }
mkdir -p "$out"
for program in kvm-probe run-check; do
	"$cxx" -std=c++20 -O2 -static -Wall -Wextra -Werror -I"$root" -I"$root/hypercalls/include" \
		-o "$out/$program" "$here/$program.cpp"
done
printf '%s\n' "$out"
