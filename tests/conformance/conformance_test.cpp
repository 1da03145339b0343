// The conformance suite under GoogleTest: one test per case, each booting a
// real guest on /dev/kvm (the same cases `lockvisor conformance` runs).
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/support/kvm_required.h"
#include "vmm/conformance/suite.h"
#include "vmm/guest_image.h"

namespace lockvisor::conformance {
namespace {

SuiteOptions options() {
  SuiteOptions o;
  if (const char* rounds = std::getenv("LOCKVISOR_PINGPONG_ROUNDS")) o.pingpong_rounds = std::strtoull(rounds, nullptr, 10);
  return o;
}

class Conformance : public ::testing::TestWithParam<std::string> {};

TEST_P(Conformance, Case) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  for (const auto& spec : all_cases(options())) {
    if (spec.name != GetParam()) continue;
    const auto result = run_case(*kvm, spec, embedded_guest_image());
    EXPECT_TRUE(result.passed) << result.reason << "\n  run: " << machine::outcome_name(result.run.outcome) << ": "
                               << result.run.reason;
    if (result.passed && !result.reason.empty()) std::printf("  %s\n", result.reason.c_str());
    return;
  }
  FAIL() << "no such case " << GetParam();
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& spec : all_cases(SuiteOptions{})) names.push_back(spec.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Suite, Conformance, ::testing::ValuesIn(case_names()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (auto& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace lockvisor::conformance
