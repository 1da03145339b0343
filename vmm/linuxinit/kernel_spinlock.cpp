#include "vmm/linuxinit/kernel_spinlock.h"

namespace lockvisor::linuxboot {

KernelSpinlock classify_kernel_spinlock(std::span<const std::string> lines, bool hypervisor_bit) {
  struct Rule {
    std::string_view text;
    const char* policy;
    const char* why;
  };
  static constexpr Rule kRules[] = {
      {"PV spinlocks enabled", "pv", "the kernel enabled PV spinlocks (paravirtual qspinlock: halt and kick)"},
      {"PV spinlocks disabled, no host support", nullptr, nullptr},
      {"PV spinlocks disabled with KVM_HINTS_REALTIME hints", "native",
       "the realtime hint keeps the native queued spinlock"},
      {"PV spinlocks disabled, single CPU", "native", "one CPU: the kernel keeps the native queued spinlock"},
      {"PV spinlocks disabled, forced by", "native", "\"nopvspin\" keeps the native queued spinlock"},
  };
  for (const auto& line : lines) {
    for (const auto& rule : kRules) {
      if (line.find(rule.text) == std::string::npos) continue;
      if (rule.policy != nullptr) return {rule.policy, line, rule.why};
      return hypervisor_bit
                 ? KernelSpinlock{"tas", line, "no PV_UNHALT on a hypervisor: virt_spin_lock makes every qspinlock a test-and-set lock"}
                 : KernelSpinlock{"native", line, "no PV_UNHALT and no hypervisor bit: the native queued spinlock"};
    }
  }
  // Every kernel with PV spinlock support prints one of the lines on KVM;
  // none seen means the log was not read or the kernel lacks the support:
  // say so rather than guess from the hypervisor bit.
  return {"unknown", "", "the kernel log has no KVM spinlock line"};
}

}  // namespace lockvisor::linuxboot
