// Lock-workload runs in tests: the binary parameters (BootInfo::workload)
// a test sets field by field. Every field the guest reads is set here or by
// the test; nothing falls back to a guest default (there are none).
#pragma once
#include "lockvisor/abi/workload.h"
#include "vmm/machine/machine_config.h"
#include "workloads/workloads.h"

namespace lockvisor::test {

// config.workload for `lock` on config.vcpus CPUs: 1 s, cs 100 ns, delay
// 170 ns, one cache line, standalone, one lock, no long holds, 10 ms
// fairness windows. Returns the record for the test to adjust.
inline abi::WorkloadParams& set_workload(machine::MachineConfig& config, abi::WorkloadKind kind, const char* lock) {
  abi::WorkloadParams p{};
  p.kind = kind;
  p.cs_ns = 100;
  p.cs_lines = 1;
  p.delay_ns = 170;
  p.duration_ns = 1'000'000'000;
  p.layout = abi::LockLayout::kStandalone;
  p.seed = config.seed;
  p.nlocks = 1;
  p.cpus = config.vcpus;
  p.fairness_window_ns = workloads::kFairnessWindowNs;
  abi::set_lock_name(p, lock);
  return config.workload.emplace(p);
}

}  // namespace lockvisor::test
