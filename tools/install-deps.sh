#!/usr/bin/env bash
# Installs what lockvisor needs to build and test, from Debian 12 packages,
# skipping what is already there. Safe to run again. Needs root (or sudo).
#
# Usage: install-deps.sh [--riscv]
#   --riscv  also what the riscv64 preset and its tests need (docs/riscv.md):
#            the whole test suite (tools/test.sh) asks for it, the main job
#            (tools/quickstart.sh) does not, so a first quick start does not
#            download a cross compiler and a second QEMU.
set -euo pipefail
riscv=0
case "${1:-}" in
  "") ;;
  --riscv) riscv=1 ;;
  *) echo "install-deps: unknown argument '$1' (usage: install-deps.sh [--riscv])" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake ninja-build
  libboost-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libbenchmark-dev
  # clang: vmm/runstate's sched_switch BPF program (clang -target bpf, CO-RE
  # against the kernel's BTF; its loader is libbpf 1.1, found with pkg-config)
  # and the report-channel fuzz target (libFuzzer, in libclang-rt-14-dev)
  clang libbpf-dev pkgconf libclang-rt-14-dev
  # tools/nested-kvm: KVM inside an emulated AMD-V machine, for hosts
  # without a usable /dev/kvm (the project's CI machines)
  qemu-system-x86 busybox-static cpio kmod xz-utils zstd
  # lockvisor lab: scenario files (TOML), plots (matplotlib, run with
  # /usr/bin/python3), and GNU parallel for sharded labs and their test
  libtomlplusplus-dev python3-matplotlib parallel
  # tests/linux: ACPICA's iasl and acpiexec decode and load the ACPI tables
  # built for Linux guests (those tests skip without them)
  acpica-tools
  # Installing and packaging (docs/install.md, tests/install): `cpack -G DEB`
  # names the package's Depends with dpkg-shlibdeps (dpkg-dev), which finds
  # the binaries with `file`; the tests render the man page with man-db
  man-db dpkg-dev file
  # The RISC-V VMM's device tree: its unit test decompiles the blob with dtc
  device-tree-compiler
)
if [ "$riscv" = 1 ]; then
  packages+=(
    # The riscv64 preset (docs/riscv.md): the cross compiler and C library,
    # GoogleTest's sources to build for riscv64, qemu-user to run the tests
    g++-riscv64-linux-gnu libc6-dev-riscv64-cross googletest qemu-user-static
    # The RV64 guest's boot test (tests/riscv): QEMU's RISC-V `virt` machine
    # and OpenSBI, the firmware the guest boots under
    qemu-system-misc opensbi
    # tools/nested-riscv: the riscv64 host kernel with KVM, built once from
    # Debian's sources and cached (the RISC-V VMM's checks run under it)
    linux-source-6.1 flex bison bc xz-utils
  )
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
echo "install-deps: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
