#include "vmm/report/kvm_totals.h"

#include <algorithm>

namespace lockvisor::report {
namespace {

constexpr const char* kNames[] = {"halt_exits",          "halt_wakeup",
                                  "hypercalls",          "directed_yield_attempted",
                                  "directed_yield_successful", "exits",
                                  "irq_injections",      "nmi_injections"};

}  // namespace

std::span<const char* const> kvm_total_names() { return kNames; }

std::uint64_t kvm_stat_sum(const machine::RunResult& result, const char* name) {
  std::uint64_t sum = 0;
  for (const auto& v : result.vcpus)
    if (auto it = v.kvm.find(name); it != v.kvm.end()) sum += it->second;
  return sum;
}

nlohmann::json kvm_totals_json(const machine::RunResult& result) {
  if (std::none_of(result.vcpus.begin(), result.vcpus.end(), [](const auto& v) { return !v.kvm.empty(); }))
    return nullptr;
  nlohmann::json totals = nlohmann::json::object();
  for (const char* name : kNames) totals[name] = kvm_stat_sum(result, name);
  return totals;
}

}  // namespace lockvisor::report
