#include "vmm/conformance/suite.h"

#include <chrono>

#include "vmm/machine/machine.h"
#include "vmm/report/settings_json.h"
#include "vmm/util/error.h"

namespace lockvisor::conformance {

CaseResult run_case(const kvm::KvmSystem& kvm, const CaseSpec& spec, std::span<const std::byte> image) {
  CaseResult result;
  result.name = spec.name;
  result.settings = report::settings_json(spec.config);
  const bool kvm_backend = spec.config.backend_kind == pvlock::BackendKind::kKvm;
  if (kvm_backend && !spec.not_for_kvm.empty()) {
    result.applicable = false;
    result.reason = spec.not_for_kvm;
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
  return result;
}

nlohmann::json results_to_json(const std::vector<CaseResult>& results) {
  nlohmann::json cases = nlohmann::json::array();
  std::size_t passed = 0;
  std::size_t not_applicable = 0;
  for (const auto& r : results) {
    passed += r.passed ? 1 : 0;
    not_applicable += r.applicable ? 0 : 1;
    cases.push_back({{"name", r.name},
                     {"applicable", r.applicable},
                     {"passed", r.passed},
                     {"settings", r.settings},
                     {"reason", r.reason},
                     {"seconds", r.seconds},
                     {"outcome", machine::outcome_name(r.run.outcome)},
                     {"run_reason", r.run.reason}});
  }
  return {{"passed", passed},
          {"failed", results.size() - passed - not_applicable},
          {"not_applicable", not_applicable},
          {"cases", cases}};
}

}  // namespace lockvisor::conformance
