// One lock-workload experiment's workload side: which lock, which workload,
// and its parameters, with every default in this one place. `run`, `bench`
// and the lab fill it; the guest and the native runner receive the
// abi::WorkloadParams that workload_params() makes of it. The machine side
// of an experiment (vCPUs, host-CPU set, pinning, kick mode and other
// backend knobs, seed) is machine::MachineConfig, whose defaults live in
// vmm/machine/machine_config.h.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "lockvisor/abi/workload.h"
#include "lockvisor/abi/workload_limits.h"

namespace lockvisor::experiment {

// The defaults are the production ones of lockvisor/abi/workload_limits.h
// (the ranges the guest checks are there too); the run-settings table
// (run_settings.cpp) shows the same values in --help, which a test checks.
struct WorkloadSettings {
  std::string lock = "auto";
  std::string workload = "lockbench";
  std::uint64_t cs_ns = abi::kCsNs.def;        // work inside the critical section
  std::uint64_t cs_lines = abi::kCsLines.def;  // shared cache lines written in it (1..16)
  std::uint64_t delay_ns = abi::kDelayNs.def;  // work outside it
  double duration_s = static_cast<double>(abi::kDurationNs.def) / 1e9;  // measured window when iterations == 0
  std::uint64_t iterations = 0;   // acquisitions per CPU; 0: run for duration_s (uncontended: 262144)
  std::string layout = "standalone";
  std::optional<std::uint64_t> locks;            // torture's lock count; unset: 4 (torture) or 1
  std::uint64_t long_hold_ns = abi::kLongHoldNs.def;  // torture: length of a long hold
  std::optional<std::uint64_t> long_hold_every;  // unset: 2000 (torture) or never; 0: never
  std::uint64_t wait_halt_delay_ns = abi::kWaitHaltDelayNs.def;  // test knob: forces a kick between a PV wait's re-check and its halt
};

// The workload defaults that depend on the workload kind, named once.
inline constexpr std::uint64_t kUncontendedIterations = abi::kUncontendedIterations;
inline constexpr std::uint64_t kTortureLocks = abi::kTortureLocks;
inline constexpr std::uint64_t kTortureLongHoldEvery = abi::kTortureLongHoldEvery;

bool is_lock_workload(const std::string& workload);
abi::WorkloadKind workload_kind(const std::string& workload);

// Throws a usage lockvisor::Error naming the option (`--lock`, `--cs-lines`...)
// for a value the workload cannot run with.
void validate(const WorkloadSettings& w);

// The parameters exactly as the workload code receives them.
abi::WorkloadParams workload_params(const WorkloadSettings& w, std::uint64_t seed, unsigned cpus);

// The `params` object of a run's JSON report.
nlohmann::json params_json(const abi::WorkloadParams& p);

// The guest's argument line for these parameters (guest/programs/lock_workloads.cpp).
std::string guest_args(const WorkloadSettings& w, const abi::WorkloadParams& p);

}  // namespace lockvisor::experiment
