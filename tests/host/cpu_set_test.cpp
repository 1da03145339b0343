// CPU-list parsing and validation: the --pcpus bad-input paths.
#include <gtest/gtest.h>

#include "vmm/host/cpu_set.h"
#include "vmm/util/error.h"

namespace lockvisor::host {
namespace {

TEST(CpuList, ParsesSinglesRangesAndDeduplicates) {
  EXPECT_EQ(parse_cpu_list("0"), (std::vector<int>{0}));
  EXPECT_EQ(parse_cpu_list("0-1"), (std::vector<int>{0, 1}));
  EXPECT_EQ(parse_cpu_list("3,0-2,1"), (std::vector<int>{0, 1, 2, 3}));
}

TEST(CpuList, FormatsRunsBack) { EXPECT_EQ(format_cpu_list({0, 1, 2, 5, 7, 8}), "0-2,5,7-8"); }

TEST(CpuList, RejectsGarbageWithOneLine) {
  for (const char* bad : {"", "x", "1-", "-1", "2-1", "0,,1", "1.5", "99999999"}) {
    try {
      parse_cpu_list(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("CPU list"), std::string::npos) << e.what();
    }
  }
}

// The placement both VMMs and the native runner use: spread wraps round
// (more threads than CPUs share them in turn), float gives every thread all.
TEST(ThreadCpus, SpreadWrapsFloatGivesAllEmptyIsUnpinned) {
  const std::vector<int> cpus{2, 5, 7};
  EXPECT_EQ(thread_cpus(cpus, 0, true), (std::vector<int>{2}));
  EXPECT_EQ(thread_cpus(cpus, 2, true), (std::vector<int>{7}));
  EXPECT_EQ(thread_cpus(cpus, 4, true), (std::vector<int>{5}));
  EXPECT_EQ(thread_cpus({0}, 3, true), (std::vector<int>{0}));
  EXPECT_EQ(thread_cpus(cpus, 4, false), cpus);
  EXPECT_TRUE(thread_cpus({}, 1, true).empty());
  EXPECT_TRUE(thread_cpus({}, 1, false).empty());
}

TEST(CpuList, ValidateRejectsMissingCpu) {
  try {
    validate_cpus({host_cpu_count() + 3});
    ADD_FAILURE() << "accepted a CPU that does not exist";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(validate_cpus(allowed_cpus()));
}

}  // namespace
}  // namespace lockvisor::host
