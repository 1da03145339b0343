// Everything that defines one run of one VM.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lockvisor/abi/sbi_pvlock.h"
#include "vmm/machine/guest_limits.h"
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

struct MachineConfig {
  unsigned vcpus = 2;
  std::uint64_t memory_mib = 64;
  std::vector<int> pcpus;  // empty: every CPU this process may use
  PinPolicy pin = PinPolicy::kSpread;

  std::string program = "pingpong";  // BootInfo::program
  std::string args;                  // BootInfo::args, "key=value ..."
  std::uint64_t seed = 1;

  bool pv_unhalt = true;  // KICK_CPU works and CPUID says so
  bool sbi_pvlock = true;
  std::uint32_t sbi_experimental_eid = abi::kSbiExtPvlockExperimentalDefault;
  bool dedicated_hint = false;
  bool steal_time = true;  // advertise KVM_FEATURE_STEAL_TIME: the guest enables its record
  RunStateMode runstate = RunStateMode::kAuto;
  pvlock::BackendOptions backend;

  double timeout_s = 0;          // 0: no watchdog
  unsigned deadlock_check_ms = 100;
  std::string serial_path;       // empty: serial output goes to stdout
  bool capture_serial = false;   // keep serial lines in RunResult::serial_lines instead (serial_path unused)
  bool echo_guest_prints = true; // log the guest's print() lines
  GuestLimits limits;            // what the guest may make the VMM keep or do (guest_limits.h)
};

}  // namespace lockvisor::machine
