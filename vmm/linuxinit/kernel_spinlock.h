// Which spinlock a Linux guest's kernel chose, read from its own log.
//
// x86 Linux decides once, at boot (arch/x86/kernel/kvm.c, kvm_spinlock_init;
// arch/x86/kernel/paravirt.c, native_pv_lock_init; Linux 6.1), and says so
// in one of these lines:
//   "PV spinlocks enabled"                               -> paravirtual qspinlock
//   "PV spinlocks disabled, no host support"             -> no PV_UNHALT: the
//        virt_spin_lock test-and-set lock when the CPU says it runs on a
//        hypervisor, else the native qspinlock
//   "PV spinlocks disabled with KVM_HINTS_REALTIME hints",
//   "PV spinlocks disabled, single CPU",
//   "PV spinlocks disabled, forced by \"nopvspin\" parameter"
//                                                        -> native qspinlock
// A kernel built without PV spinlock support prints none of them: the
// result is then "unknown", not a guess.
#pragma once
#include <span>
#include <string>
#include <string_view>

namespace lockvisor::linuxboot {

struct KernelSpinlock {
  std::string policy;  // "pv", "tas", "native", or "unknown" (no line seen)
  std::string line;    // the kernel's line that decided it (empty when none)
  std::string why;     // one sentence, for the report
};

// `lines`: kernel log lines (any prefix, e.g. "[    0.123456] kvm-guest: ").
// `hypervisor_bit`: CPUID.1:ECX[31] as the VMM set it.
KernelSpinlock classify_kernel_spinlock(std::span<const std::string> lines, bool hypervisor_bit);

}  // namespace lockvisor::linuxboot
