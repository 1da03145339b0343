// What the guest's wake-up handlers counted (--pv-wake; WorkloadStats'
// wake_* fields) beside what KVM counted for the same path, and whether the
// two agree. Per vCPU, over the whole run:
//   ipi:       handler entries == KVM's irq_injections
//   nmi:       handler entries == KVM's nmi_injections
//   hypercall: no handler entries, and KVM injected no interrupt and no NMI
//              (KICK_CPU sets pv_unhalted; it injects nothing)
// Unknown (nullopt) where KVM has no binary statistics. `within` is the
// weaker form, the guest's count at most KVM's: KVM counts each injection,
// and an NMI or interrupt whose delivery an exit interrupted is injected
// again (measured once in 18 nested runs: 3 NMIs injected, 2 taken, the
// handler that took the third ran 8 ms, its vCPU descheduled inside it).
// More taken than injected is always a fault.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockvisor/abi/pv_wake.h"
#include "lockvisor/abi/workload.h"
#include "vmm/machine/run_result.h"

namespace lockvisor::lockstat {

struct WakeVcpu {
  std::uint64_t interrupts = 0, woken = 0, spurious = 0, halts_skipped = 0;
  double handler_ns = 0, handler_max_ns = 0;
  std::optional<std::uint64_t> kvm_irq_injections, kvm_nmi_injections, kvm_hypercalls, kvm_halt_exits,
      kvm_halt_wakeup;
  std::optional<bool> agrees;
  std::optional<bool> within;
};

struct WakeCheck {
  abi::PvWake mechanism = abi::PvWake::kHypercall;
  std::vector<WakeVcpu> vcpus;
  WakeVcpu total;  // sums; handler_max_ns the longest; agrees: every vCPU's
};

WakeCheck check_wake(abi::PvWake mechanism, const std::vector<abi::WorkloadStats>& stats,
                     const machine::RunResult& run);
nlohmann::json to_json(const WakeCheck& check);
// One line for the text report.
std::string wake_line(const WakeCheck& check);

}  // namespace lockvisor::lockstat
