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
  // With --backend kvm: why the case makes no sense there (it is then
  // reported "not applicable", never passed); empty when it applies.
  std::string not_for_kvm = {};
  // With --backend kvm: the check, when KVM's statistics must be read
  // differently (no kicks_received, halts split by KVM's own counters);
  // empty: `check` applies as it is.
  std::function<std::optional<std::string>(const machine::RunResult&)> check_kvm = nullptr;
  // With the userspace backend: why the case needs KVM's own (it is then
  // reported "not applicable"); empty when it runs on both.
  std::string only_for_kvm = {};
};

struct SuiteOptions {
  std::uint64_t pingpong_rounds = 100000;
  double case_timeout_s = 600;
  pvlock::BackendKind backend = pvlock::BackendKind::kUserspace;  // --backend, for every case
};

std::vector<CaseSpec> all_cases(const SuiteOptions& options);

struct CaseResult {
  std::string name;
  bool applicable = true;  // false: not run, `reason` says why
  bool passed = false;
  std::string reason;  // failure reason, or notes on success
  double seconds = 0;
  machine::RunResult run;  // the freestanding cases' run (the Linux cases run theirs in a child)
  std::string outcome;     // how the run ended (machine::outcome_name; a child's: its exit code's)
  std::string run_reason;  // the run's own account of it
  std::vector<std::string> details;  // lines shown under a failed case (a child run's last output)
  nlohmann::json settings;  // report::settings_json of the case's configuration
};

CaseResult run_case(const kvm::KvmSystem& kvm, const CaseSpec& spec, std::span<const std::byte> image);

struct Tally {
  std::size_t passed = 0, failed = 0, not_applicable = 0;
};
Tally tally(const std::vector<CaseResult>& results);
// {arch, passed, failed, not_applicable, cases: [...]}: both case groups' --json;
// arch names the architecture this lockvisor runs on (vmm/arch/arch_name.h).
nlohmann::json results_to_json(const std::vector<CaseResult>& results);

}  // namespace lockvisor::conformance
