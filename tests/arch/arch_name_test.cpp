// The architecture's name in the reports: one definition (arch_name.h), which
// the conformance JSON carries; this build is x86-64's.
#include "vmm/arch/arch_name.h"

#include <gtest/gtest.h>

#include "vmm/conformance/suite.h"

namespace lockvisor::arch {
namespace {

TEST(ArchName, ThisBuildAndItsConformanceJsonSayX86_64) {
  EXPECT_EQ(kThisArch, kX86_64);
  EXPECT_NE(kX86_64, kRiscv64);
  EXPECT_EQ(conformance::results_to_json({})["arch"], "x86_64");
}

}  // namespace
}  // namespace lockvisor::arch
