#!/usr/bin/env bash
# Runs a command where /dev/kvm works: directly when this host has a usable
# /dev/kvm, otherwise inside tools/nested-kvm (Linux KVM in an emulated AMD-V
# machine; slower, but real KVM). Prints which one it chose.
#
# LOCKVISOR_WITH_KVM overrides the choice:
#   auto    (default) this host's /dev/kvm when usable, else tools/nested-kvm
#   local   this host's /dev/kvm; fails with one line (exit 6) when it is not usable
#   nested  tools/nested-kvm, even where this host has a usable /dev/kvm
# The local KVM device is $LOCKVISOR_KVM_DEVICE when set (as for lockvisor), else /dev/kvm.
# The nested machine gets LOCKVISOR_NESTED_MEM MiB (default 5120): a lockvisor
# run may ask for up to 4096 MiB of guest memory (--memory), and the lab's
# traced runs ask for 2048 and fill much of it with the lock log, so the
# nested kernel's OOM killer must not be what ends them (QEMU allocates the
# memory only as the machine touches it).
#
# A riscv64 program (a static ELF binary for RISC-V, as COMMAND's first word)
# runs inside tools/nested-riscv instead, a RISC-V machine with KVM: it can
# run nowhere else on these x86 hosts (LOCKVISOR_WITH_KVM=local refuses it).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mode=${LOCKVISOR_WITH_KVM:-auto}
device=${LOCKVISOR_KVM_DEVICE:-/dev/kvm}
case "$mode" in
auto | local | nested) ;;
*)
  echo "with-kvm: error: LOCKVISOR_WITH_KVM='$mode' is not one of auto, local, nested" >&2
  exit 2
  ;;
esac
local_usable() { [ -r "$device" ] && [ -w "$device" ]; }
# ELF magic, 64-bit (class 2), little-endian (1), e_machine 0xf3 (RISC-V) at offset 18.
is_riscv64() {
  local h
  [ -f "$1" ] && h=$(od -An -tx1 -N 20 "$1" 2>/dev/null | tr -d ' \n') &&
    [ "${h:0:12}" = 7f454c460201 ] && [ "${h:36:4}" = f300 ]
}
if [ $# -gt 0 ] && is_riscv64 "$1"; then
  if [ "$mode" = local ]; then
    echo "with-kvm: error: LOCKVISOR_WITH_KVM=local, but $1 is a riscv64 program: it runs only inside tools/nested-riscv" >&2
    exit 6
  fi
  echo "with-kvm: $1 is a riscv64 program: running inside tools/nested-riscv (emulated RISC-V with the H extension, real KVM)" >&2
  "$here/nested-riscv/prepare.sh" >/dev/null
  exec "$here/nested-riscv/run.sh" --smp 2 --mem "${LOCKVISOR_NESTED_MEM:-5120}" \
    --timeout "${LOCKVISOR_NESTED_TIMEOUT:-3000}" -- "$@"
fi
if [ "$mode" = local ] && ! local_usable; then
  echo "with-kvm: error: LOCKVISOR_WITH_KVM=local, but this host has no usable $device (missing, or not readable and writable by this user)" >&2
  exit 6
fi
if [ "$mode" != nested ] && local_usable; then
  echo "with-kvm: using this host's $device${LOCKVISOR_WITH_KVM:+ (LOCKVISOR_WITH_KVM=$mode)}" >&2
  exec "$@"
fi
if [ "$mode" = nested ]; then
  echo "with-kvm: LOCKVISOR_WITH_KVM=nested: running inside tools/nested-kvm (emulated AMD-V, real KVM)" >&2
else
  echo "with-kvm: no usable $device here; running inside tools/nested-kvm (emulated AMD-V, real KVM)" >&2
fi
"$here/nested-kvm/prepare.sh" >&2
exec "$here/nested-kvm/run.sh" --smp 2 --mem "${LOCKVISOR_NESTED_MEM:-5120}" \
  --timeout "${LOCKVISOR_NESTED_TIMEOUT:-3000}" -- "$@"
