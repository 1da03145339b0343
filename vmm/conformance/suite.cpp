#include "vmm/conformance/suite.h"

#include <chrono>

#include "vmm/arch/arch_name.h"
#include "vmm/machine/machine.h"
#include "vmm/report/settings_json.h"
#include "vmm/util/error.h"

namespace lockvisor::conformance {

CaseResult run_case(const kvm::KvmSystem& kvm, const CaseSpec& spec, std::span<const std::byte> image) {
  CaseResult result;
  result.name = spec.name;
  result.settings = report::settings_json(spec.config);
  const bool kvm_backend = spec.config.backend_kind == pvlock::BackendKind::kKvm;
  if (kvm_backend ? !spec.not_for_kvm.empty() : !spec.only_for_kvm.empty()) {
    result.applicable = false;
    result.reason = kvm_backend ? spec.not_for_kvm : spec.only_for_kvm;
    result.outcome = machine::outcome_name(result.run.outcome);
    return result;
  }
  const auto& check = kvm_backend && spec.check_kvm ? spec.check_kvm : spec.check;
  const auto start = std::chrono::steady_clock::now();
  try {
    machine::Machine vm(kvm, spec.config, image);
    result.run = vm.run();
    if (auto failure = check(result.run)) {
      result.reason = *failure;
    } else {
      result.passed = true;
      if (spec.notes) result.reason = spec.notes(result.run);
    }
  } catch (const Error& e) {
    result.reason = e.what();
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.outcome = machine::outcome_name(result.run.outcome);
  result.run_reason = result.run.reason;
  return result;
}

Tally tally(const std::vector<CaseResult>& results) {
  Tally t;
  for (const auto& r : results) {
    if (!r.applicable) ++t.not_applicable;
    else if (r.passed) ++t.passed;
    else ++t.failed;
  }
  return t;
}

nlohmann::json results_to_json(const std::vector<CaseResult>& results) {
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& r : results) {
    cases.push_back({{"name", r.name},
                     {"applicable", r.applicable},
                     {"passed", r.passed},
                     {"settings", r.settings},
                     {"reason", r.reason},
                     {"seconds", r.seconds},
                     {"outcome", r.outcome},
                     {"run_reason", r.run_reason}});
    if (!r.details.empty()) cases.back()["details"] = r.details;
  }
  const Tally t = tally(results);
  return {{"arch", arch::kThisArch}, {"passed", t.passed}, {"failed", t.failed}, {"not_applicable", t.not_applicable}, {"cases", cases}};
}

}  // namespace lockvisor::conformance
