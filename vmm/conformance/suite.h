// The hypercall conformance suite: each case boots a real guest on /dev/kvm
// with a configuration, and checks what the guest reported and what the VMM
// counted. Guest halves: guest/programs/*_conformance.cpp, pingpong, faults.
#pragma once
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vmm/kvm/kvm_system.h"
#include "vmm/machine/machine_config.h"
#include "vmm/machine/run_result.h"

namespace lockvisor::conformance {

struct CaseSpec {
  std::string name;
  std::string summary;
  machine::MachineConfig config;
  // nullopt when the run behaved as specified, otherwise why not (one line).
  std::function<std::optional<std::string>(const machine::RunResult&)> check;
  // Measurements worth printing next to PASS (e.g. latency percentiles).
  std::function<std::string(const machine::RunResult&)> notes;
};

struct SuiteOptions {
  std::uint64_t pingpong_rounds = 100000;
  double case_timeout_s = 600;
};

std::vector<CaseSpec> all_cases(const SuiteOptions& options);

struct CaseResult {
  std::string name;
  bool passed = false;
  std::string reason;  // failure reason, or notes on success
  double seconds = 0;
  machine::RunResult run;
};

CaseResult run_case(const kvm::KvmSystem& kvm, const CaseSpec& spec, std::span<const std::byte> image);
nlohmann::json results_to_json(const std::vector<CaseResult>& results);

}  // namespace lockvisor::conformance
