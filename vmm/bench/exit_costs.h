// The platform's cost of leaving the guest, measured by booting the built-in
// guest's benchmark programs: a bare PIO exit to the VMM, the doorbell
// hypercall round trip (interleaved in one guest, so that noise hits both),
// and kick->wake (one vCPU kicks a halted one). `lockvisor bench` prints
// them; the lab measures them at its start so that its report states what
// this host's exits cost instead of a figure from another machine.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "vmm/machine/machine_config.h"
#include "vmm/machine/run_result.h"
#include "vmm/metrics/summary.h"

namespace lockvisor::bench {

// Boots one guest with this configuration and returns its completed result;
// a run that does not complete throws (the caller decides what that means:
// bench ends with the run's exit code, the lab records "not measured").
using BootFn = std::function<machine::RunResult(machine::MachineConfig)>;

struct ExitCosts {
  metrics::LatencySummary bare_exit_ns;  // per batch median over `batches` batches
  metrics::LatencySummary doorbell_ns;
};

// bench-doorbell on one vCPU; `batches` 0 keeps the guest's default (200).
ExitCosts measure_exit_costs(const BootFn& boot, std::uint64_t batches = 0);

struct KickWake {
  metrics::LatencySummary guest_ns;  // kick to the kicked vCPU running again, guest clock
  nlohmann::json vmm;                // report::wake_latency_json: the VMM's own wake latency
};

// kick-wake on two vCPUs placed on `pcpus` with `pin`; rounds 1..4096.
KickWake measure_kick_wake(const BootFn& boot, const std::vector<int>& pcpus, machine::PinPolicy pin,
                           std::uint64_t rounds);

// TSC cycles in ns: 128-bit and saturating, so that no count wraps around
// to a plausible value.
std::uint64_t tsc_cycles_to_ns(std::uint64_t cycles, std::uint64_t tsc_khz);

// A guest-reported sample array of TSC cycles in ns. Missing or empty
// samples mean the guest did not run the benchmark: a guest error (exit 3),
// not a zero cost.
std::vector<std::uint64_t> cycles_to_ns(const machine::RunResult& run, const char* key);

}  // namespace lockvisor::bench
