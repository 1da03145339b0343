#!/bin/bash
# Boots an RV64 guest image under OpenSBI in QEMU's `virt` machine and checks
# its console (guest/programs/riscv64_smoke.cpp and riscv64_fault.cpp print
# the lines read here).
# Usage: boot_guest.sh pass|fault|bad-boot-info IMAGE
#   all    the banner: 4 harts, and the lock clock's rate read from the device
#          tree (10 MHz on `virt`); QEMU ends by itself (SBI SRST power-off).
#   pass   each SBI PVLOCK EID probed "absent"; the wait/kick latch's two cases
#          "ok" (a lost kick hangs: the time limit); one "lock NAME: ok" line
#          for every lock of guest/locks/registry.h, with violations=0 and
#          acquisitions equal to harts x iterations; "PASS" last.
#   fault  the trap handler names the illegal instruction and "FAIL" comes
#          last: a faulting guest fails, never hangs.
#   bad-boot-info  QEMU's device tree with /chosen/lockvisor,boot-info added
#          (fdt_set_chosen.py), as lockvisor's VMM names its BootInfo, but one
#          the guest must not trust: a property that is not one u64, a
#          misaligned address, RAM holding no BootInfo, and a BootInfo of
#          another version (loaded by QEMU's generic loader). Each boot must
#          name what is wrong ("FAIL: hart N: ...") and end with FAIL: the
#          guest never runs a program from an unchecked BootInfo.
# Exit 0 when the lines are right, 1 when not, 77 (skip) without
# qemu-system-riscv64 or OpenSBI; under CI=true a skip is a failure.
set -u
mode=$1
image=$2
here=$(cd "$(dirname "$0")" && pwd)
registry=$here/../../guest/locks/registry.h
firmware=/usr/lib/riscv64-linux-gnu/opensbi/generic/fw_dynamic.bin
harts=4
limit_s=150

fail() {
  echo "FAIL: $*"
  exit 1
}

if ! command -v qemu-system-riscv64 >/dev/null || [ ! -f "$firmware" ]; then
  [ "${CI:-}" = true ] && fail "no qemu-system-riscv64 or $firmware under CI=true (tools/install-deps.sh)"
  echo "SKIP: needs qemu-system-riscv64 (qemu-system-misc) and $firmware (opensbi)"
  exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log=$work/console
machine=(qemu-system-riscv64 -M virt -cpu rv64 -smp "$harts" -m 256 -nographic -bios "$firmware")

# boot [QEMU ARGS...]: boots the image; the guest's lines (without OpenSBI's
# banner and the serial console's CRs) in $log.guest, the last one in $last.
boot() {
  local start rc
  start=$(date +%s)
  timeout "$limit_s" "${machine[@]}" -kernel "$image" "$@" </dev/null >"$log" 2>&1
  rc=$?
  echo "qemu exited with $rc after $(($(date +%s) - start)) s; the guest's console:"
  tr -d '\r' <"$log" | sed -n -E '/^(lockvisor rv64 guest:|FAIL)/,$p' | tee "$log.guest"
  [ "$rc" = 124 ] && fail "the guest did not power off within $limit_s s"
  [ "$rc" = 0 ] || fail "qemu-system-riscv64 exited with $rc"
  last=$(tail -n 1 "$log.guest")
}

# A device tree with /chosen/lockvisor,boot-info = HEXBYTES, in $work/chosen.dtb.
chosen_dtb() {
  [ -f "$work/virt.dtb" ] || "${machine[@]}" -M virt,dumpdtb="$work/virt.dtb" >/dev/null 2>&1 ||
    fail "qemu-system-riscv64 could not dump its device tree"
  python3 "$here/fdt_set_chosen.py" "$work/virt.dtb" "$work/chosen.dtb" lockvisor,boot-info "$1" ||
    fail "fdt_set_chosen.py failed"
}

if [ "$mode" = bad-boot-info ]; then
  # RAM the image does not reach (it is linked at 0x80200000 and small).
  unused=0000000088000000
  # A BootInfo's first 16 bytes: magic "LVBOO01" (kBootInfoMagic), version 0, size 0.
  printf 'LVBOO01\0\0\0\0\0\0\0\0\0' >"$work/old-boot-info"
  expect_refusal() {  # WHY-PATTERN [QEMU ARGS...]
    local why=$1
    shift
    boot -dtb "$work/chosen.dtb" "$@"
    grep -q "^FAIL: hart [0-9]*: $why" "$log.guest" || fail "no 'FAIL: ... $why' line"
    ! grep -q "^lockvisor rv64 guest:" "$log.guest" || fail "the guest went on as if the BootInfo were good"
    [ "$last" = FAIL ] || fail "the last line is '$last', not FAIL"
  }
  chosen_dtb 88000000
  expect_refusal "/chosen/lockvisor,boot-info is not one u64"
  chosen_dtb 0000000088000004
  expect_refusal "BootInfo's address .* is misaligned or below RAM"
  chosen_dtb $unused
  expect_refusal "BootInfo has the wrong magic"
  expect_refusal "BootInfo's version or size is not this image's" \
    -device loader,file="$work/old-boot-info",addr=0x$unused,force-raw=on
  echo "ok: $mode"
  exit 0
fi

boot
# QEMU's `virt` has a 10 MHz timebase: the guest read it from the device tree.
grep -q "^lockvisor rv64 guest: $harts harts, boot hart [0-9]*, lock clock 10000 kHz$" "$log.guest" ||
  fail "no banner naming $harts harts and the 10000 kHz lock clock"

case $mode in
  pass)
    for eid in 0x50564c4b 0xab0401 0x850564c; do
      grep -qx "sbi pvlock $eid: absent" "$log.guest" || fail "no 'sbi pvlock $eid: absent' line"
    done
    for case in kick-to-self kick-before-wait; do
      grep -qx "wake $case: ok" "$log.guest" || fail "no 'wake $case: ok' line"
    done
    # Every registry name, read from its one list (the X rows of LOCKVISOR_LOCKS).
    names=$(sed -n 's/^ *X([a-z_]*, *[A-Za-z]*, *"\([a-z-]*\)").*/\1/p' "$registry")
    [ -n "$names" ] || fail "no lock names in $registry"
    expected=$((harts * $(sed -n 's/^constexpr u64 kIterations = \([0-9]*\);/\1/p' "$here/../../guest/programs/riscv64_smoke.cpp")))
    for name in $names; do
      grep -qx "lock $name: ok acquisitions=$expected/$expected counted=$expected violations=0 .*" "$log.guest" ||
        fail "lock $name: no passing line with $expected acquisitions and no violation"
    done
    ! grep -q "FAIL" "$log.guest" || fail "the guest reported a failure"
    [ "$last" = PASS ] || fail "the last line is '$last', not PASS"
    ;;
  fault)
    grep -q "^FAIL: hart [0-9]*: trap: illegal instruction (scause 0x2) at sepc 0x" "$log.guest" ||
      fail "the trap handler did not name the illegal instruction"
    [ "$last" = FAIL ] || fail "the last line is '$last', not FAIL"
    ;;
  *) fail "unknown mode '$mode' (pass, fault or bad-boot-info)" ;;
esac
echo "ok: $mode"
