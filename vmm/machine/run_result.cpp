#include "vmm/machine/run_result.h"

#include <fmt/format.h>

namespace lockvisor::machine {

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::kCompleted: return "completed";
    case Outcome::kGuestFailed: return "guest-failed";
    case Outcome::kUsageError: return "usage-error";
    case Outcome::kGuestFault: return "guest-fault";
    case Outcome::kTimeout: return "timeout";
    case Outcome::kDeadlock: return "deadlock";
    case Outcome::kHostError: return "host-error";
    case Outcome::kInterrupted: return "interrupted";
  }
  return "unknown";
}

const char* vcpu_state_name(VcpuState state) {
  switch (state) {
    case VcpuState::kStarting: return "starting";
    case VcpuState::kRunning: return "running";
    case VcpuState::kHalted: return "halted";
    case VcpuState::kDone: return "done";
    case VcpuState::kFaulted: return "faulted";
    case VcpuState::kStopped: return "stopped";
  }
  return "unknown";
}

std::uint64_t RunResult::guest_text_replaced() const {
  std::uint64_t sum = 0;
  for (const auto& v : vcpus) sum += v.guest_text_replaced;  // each is bounded by the message limit
  return sum;
}

const ResultValue* RunResult::result(unsigned vcpu, const std::string& key) const {
  if (vcpu >= vcpus.size()) return nullptr;
  for (const auto& r : vcpus[vcpu].results)
    if (r.key == key) return &r;
  return nullptr;
}

const pvlock::PvCounts& RunResult::pv(unsigned vcpu) const {
  static const pvlock::PvCounts kNone;
  return vcpu < vcpus.size() ? vcpus[vcpu].pv : kNone;
}

std::string outcome_for_exit_code(int code) {
  for (auto o : {Outcome::kCompleted, Outcome::kGuestFailed, Outcome::kUsageError, Outcome::kGuestFault,
                 Outcome::kTimeout, Outcome::kDeadlock, Outcome::kHostError, Outcome::kInterrupted})
    if (exit_code(o) == code) return outcome_name(o);
  if (code > 128) return fmt::format("killed-by-signal-{}", code - 128);
  return fmt::format("exit-code-{}", code);
}

}  // namespace lockvisor::machine
