// One run of the RV64 freestanding guest under RISC-V KVM: the VM and its
// RAM at abi::kRiscvRamBase, one thread per vCPU in KVM_RUN, the SBI calls
// KVM forwards (the console, lockvisor's extension, SBI PVLOCK through the
// hypercall table, the report channel), SRST, the watchdog, SIGINT and the
// lost-wakeup detector. The run completes when every hart has reported DONE
// (or the guest powers off with SRST).
// riscv64 only.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vmm/arch/riscv64/rv_boot.h"
#include "vmm/arch/riscv64/rv_kick.h"
#include "vmm/machine/run_result.h"
#include "vmm/pvlock/pv_counters.h"

namespace lockvisor::arch::riscv64 {

struct RvMachineConfig {
  RvBootSettings boot;  // harts = the vCPU count
  // --pcpus, resolved and checked: hart i's thread on pcpus[i % n], as x86
  // places its vCPU threads with --pin spread (host::thread_cpus); empty:
  // not pinned.
  std::vector<int> pcpus;
  std::uint64_t memory_mib = 256;
  KickMode kick = KickMode::kSticky;
  double timeout_seconds = 0;  // 0: none
  std::span<const std::byte> image;
};

struct RvHartReport {
  std::vector<int> affinity;   // the host CPUs its thread could run on
  pvlock::PvCounts pv;         // kicks sent / received / coalesced / dropped
  std::uint64_t acks = 0;      // kLvSbiKickAck calls that found a kick latched: the WFIs a sticky kick ended
  std::uint64_t wfi_exits = 0; // KVM's wfi_exit_stat: the guest's halts
  std::uint64_t sbi_exits = 0;
  bool done = false;                // reported DONE on the report channel
  std::uint64_t exit_code = 0;      // ... with this code
  std::vector<machine::ResultValue> results;
  std::vector<machine::GuestCase> cases;
};

struct RvRunResult {
  machine::Outcome outcome = machine::Outcome::kHostError;
  std::string reason;   // one line
  std::string console;  // what the guest printed, hart by hart, whole lines
  std::vector<RvHartReport> harts;
  std::uint64_t timebase_hz = 0;
  std::uint64_t unknown_sbi_calls = 0;
  double wall_seconds = 0;
};

// Throws lockvisor::Error for what fails before the guest runs (no
// /dev/kvm, a bad image); everything after is in the result.
RvRunResult run_rv_machine(const RvMachineConfig& config);

}  // namespace lockvisor::arch::riscv64
