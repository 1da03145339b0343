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

// The same cases with --backend kvm (KVM's in-kernel KICK_CPU). PVM cannot
// run that backend (vmcall never completes): there every case skips with the
// reason, also under CI=true, because tools/test.sh runs this suite with the
// kvm backend inside tools/nested-kvm on such hosts. Cases that make no sense
// for the kvm backend skip with theirs.
class ConformanceKvmBackend : public ::testing::TestWithParam<std::string> {};

TEST_P(ConformanceKvmBackend, Case) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  if (kvm::detect_backend() == kvm::Backend::kPvm)
    GTEST_SKIP() << "--backend kvm cannot run on PVM (vmcall never completes); tools/test.sh runs it nested";
  auto o = options();
  o.backend = pvlock::BackendKind::kKvm;
  for (const auto& spec : all_cases(o)) {
    if (spec.name != GetParam()) continue;
    const auto result = run_case(*kvm, spec, embedded_guest_image());
    if (!result.applicable) GTEST_SKIP() << "not applicable to --backend kvm: " << result.reason;
    EXPECT_TRUE(result.passed) << result.reason << "\n  run: " << machine::outcome_name(result.run.outcome) << ": "
                               << result.run.reason;
    return;
  }
  FAIL() << "no such case " << GetParam();
}

// The userspace backend's list leaves out the cases only KVM's own backend
// can run (--pv-wake ipi|nmi): they are ConformanceKvmBackend's.
std::vector<std::string> case_names(bool kvm_backend) {
  std::vector<std::string> names;
  for (const auto& spec : all_cases(SuiteOptions{}))
    if (kvm_backend || spec.only_for_kvm.empty()) names.push_back(spec.name);
  return names;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (auto& c : name)
    if (c == '-') c = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Suite, Conformance, ::testing::ValuesIn(case_names(false)), test_name);
INSTANTIATE_TEST_SUITE_P(Suite, ConformanceKvmBackend, ::testing::ValuesIn(case_names(true)), test_name);

}  // namespace
}  // namespace lockvisor::conformance
