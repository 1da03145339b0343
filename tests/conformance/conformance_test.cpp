// The conformance suite under GoogleTest: one test per case, each booting a
// real guest on /dev/kvm (the same cases `lockvisor conformance` runs).
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/support/ci_required.h"
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

// The same cases with --backend kvm (KVM's in-kernel KICK_CPU), less those
// that make no sense there (CaseSpec::not_for_kvm; the test below checks they
// are reported so). PVM cannot run that backend (vmcall never completes):
// there every case skips with the reason on a developer's machine and fails
// in CI, where tools/test.sh leaves this suite out on PVM and runs the kvm
// backend's conformance inside tools/nested-kvm instead.
class ConformanceKvmBackend : public ::testing::TestWithParam<std::string> {};

SuiteOptions kvm_backend_options() {
  auto o = options();
  o.backend = pvlock::BackendKind::kKvm;
  return o;
}

TEST_P(ConformanceKvmBackend, Case) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  if (kvm::detect_backend() == kvm::Backend::kPvm)
    LOCKVISOR_SKIP_OUTSIDE_CI("--backend kvm cannot run on PVM (vmcall never completes); tools/test.sh runs it nested");
  for (const auto& spec : all_cases(kvm_backend_options())) {
    if (spec.name != GetParam()) continue;
    const auto result = run_case(*kvm, spec, embedded_guest_image());
    ASSERT_TRUE(result.applicable) << "listed for --backend kvm but not applicable: " << result.reason;
    EXPECT_TRUE(result.passed) << result.reason << "\n  run: " << machine::outcome_name(result.run.outcome) << ": "
                               << result.run.reason;
    return;
  }
  FAIL() << "no such case " << GetParam();
}

// A case that makes no sense for the kvm backend is reported "not
// applicable" with its reason, without booting anything (so on PVM too).
TEST(ConformanceKvmBackendList, CasesNotForKvmAreReportedNotApplicable) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  std::size_t not_for_kvm = 0;
  for (const auto& spec : all_cases(kvm_backend_options())) {
    if (spec.not_for_kvm.empty()) continue;
    ++not_for_kvm;
    const auto result = run_case(*kvm, spec, embedded_guest_image());
    EXPECT_FALSE(result.applicable) << spec.name;
    EXPECT_FALSE(result.passed) << spec.name;
    EXPECT_EQ(result.reason, spec.not_for_kvm) << spec.name;
  }
  EXPECT_GT(not_for_kvm, 0u) << "no case is marked not_for_kvm: this test checks nothing";
}

// The userspace backend's list leaves out the cases only KVM's own backend
// can run (--pv-wake ipi|nmi); the kvm backend's leaves out those not for it.
std::vector<std::string> case_names(bool kvm_backend) {
  std::vector<std::string> names;
  for (const auto& spec : all_cases(SuiteOptions{}))
    if (kvm_backend ? spec.not_for_kvm.empty() : spec.only_for_kvm.empty()) names.push_back(spec.name);
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
