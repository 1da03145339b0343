// Everything that defines one run of one VM.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <optional>

#include "lockvisor/abi/lock_probe.h"
#include "lockvisor/abi/pv_wake.h"
#include "lockvisor/abi/sbi_pvlock.h"
#include "lockvisor/abi/workload.h"
#include "vmm/machine/guest_limits.h"
#include "vmm/machine/vnuma.h"
#include "vmm/pvlock/pv_backend.h"

namespace lockvisor::machine {

enum class PinPolicy {
  kSpread,  // vCPU i pinned to pcpus[i % n]
  kFloat,   // every vCPU may run on any of pcpus
};

// --runstate: the vCPU run-state page (docs/runstate.md).
enum class RunStateMode {
  kAuto,  // publish it when the BPF program loads, else a zero page ("unknown")
  kOn,    // publish it or fail the run (host error, exit code 6)
  kOff,   // always a zero page
};

// --ple: pause-loop exiting (Intel PLE, AMD pause filter).
enum class PleMode {
  kOn,   // as KVM sets it up (the module parameters decide)
  kOff,  // KVM_CAP_X86_DISABLE_EXITS with KVM_X86_DISABLE_EXITS_PAUSE
};

struct MachineConfig {
  unsigned vcpus = 2;
  std::uint64_t memory_mib = 64;
  std::vector<int> pcpus;  // empty: every CPU this process may use
  PinPolicy pin = PinPolicy::kSpread;
  // --vnuma: the virtual NUMA topology (nullopt: one node, no node pinning);
  // with it each vCPU thread runs on its node's host CPUs (pin applies
  // within the node) and pcpus is not used for placement.
  std::optional<VnumaTopology> vnuma;
  // --vnuma-remote-ns: the modelled cost of a remote lock handoff
  // (BootInfo::numa_remote_ns); 0: none. Needs vnuma.
  unsigned vnuma_remote_ns = 0;

  std::string program = "pingpong";  // BootInfo::program
  std::string args;                  // BootInfo::args, "key=value ..."
  // Lock workloads: BootInfo::workload (binary; the lock programs read only
  // this). The Machine stamps the header (abi::stamp_header).
  std::optional<abi::WorkloadParams> workload;
  std::uint64_t seed = 1;
  // --inject: the schedules as given (canonical text, for the report), and
  // the targeted ones as the guest sees them (BootInfo::lock_probe; nullopt:
  // the lock probe is off). The injector service (vmm/inject/) carries them out.
  std::vector<std::string> inject;
  std::optional<abi::LockProbeConfig> lock_probe;

  bool pv_unhalt = true;  // KICK_CPU works and CPUID says so
  bool sbi_pvlock = true;
  std::uint32_t sbi_experimental_eid = abi::kSbiExtPvlockExperimentalDefault;
  bool dedicated_hint = false;
  bool steal_time = true;  // advertise KVM_FEATURE_STEAL_TIME: the guest enables its record
  RunStateMode runstate = RunStateMode::kAuto;
  pvlock::BackendKind backend_kind = pvlock::BackendKind::kUserspace;  // --backend
  pvlock::BackendOptions backend;
  unsigned guest_ring = 3;          // --guest-ring: 3, or 0 (the program runs at CPL0)
  abi::PvWake pv_wake = abi::PvWake::kHypercall;  // --pv-wake: how a PV lock wakes a halted waiter
  PleMode ple = PleMode::kOn;       // --ple
  bool sbi_kick_proposed = false;   // --sbi-kick proposed: SBI kicks to running vCPUs are lost

  double timeout_s = 0;          // 0: no watchdog
  unsigned deadlock_check_ms = 100;
  std::string serial_path;       // empty: serial output goes to stdout
  bool capture_serial = false;   // keep serial lines in RunResult::serial_lines instead (serial_path unused)
  bool echo_guest_prints = true; // log the guest's print() lines
  GuestLimits limits;            // what the guest may make the VMM keep or do (guest_limits.h)
};

}  // namespace lockvisor::machine
