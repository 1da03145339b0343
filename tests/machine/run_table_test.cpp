// The text report's per-vCPU table (report::print_run_table): one row per
// vCPU up to a screen of them, a per-column summary beyond.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "vmm/machine/run_result.h"
#include "vmm/report/run_report.h"

namespace lockvisor::report {
namespace {

std::string table_of(unsigned vcpus) {
  machine::RunResult result;
  result.runstate = "unknown";
  for (unsigned i = 0; i < vcpus; ++i) {
    machine::VcpuReport v;
    v.index = i;
    v.pv.halts = 10 + i;  // vCPU 0 halts least, the last one most
    v.cpu_seconds = 0.5;
    v.steal_time_ns = 1000000;
    result.vcpus.push_back(v);
  }
  char* text = nullptr;
  std::size_t size = 0;
  std::FILE* out = ::open_memstream(&text, &size);
  print_run_table(result, out);
  std::fclose(out);
  std::string s(text, size);
  std::free(text);
  return s;
}

TEST(RunTable, OneRowPerVcpuUpToAScreen) {
  const std::string s = table_of(32);
  EXPECT_NE(s.find("vCPU    state"), std::string::npos) << s;
  EXPECT_NE(s.find("\n  31 "), std::string::npos) << s;
  EXPECT_EQ(s.find("summarised per column"), std::string::npos) << s;
  EXPECT_NE(s.find(" 31:1.0/-"), std::string::npos) << "steal time per vCPU: " << s;
}

TEST(RunTable, SummaryBeyondAScreen) {
  const std::string s = table_of(40);
  EXPECT_NE(s.find("40 vCPUs"), std::string::npos) << s;
  EXPECT_EQ(s.find("vCPU    state"), std::string::npos) << "no per-vCPU rows: " << s;
  EXPECT_EQ(s.find("\n  39 "), std::string::npos) << s;
  // halts 10..49: total 1180, min 10, p50 29, p90 45, max 49, least vCPU 0, most vCPU 39.
  EXPECT_NE(s.find("    halts         1180         10         29         45         49  vCPU 0 / vCPU 39"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("    cpu-s           20        0.5        0.5        0.5        0.5"), std::string::npos) << s;
  EXPECT_NE(s.find("steal time (guest record / host runqueue wait, ms), all vCPUs: 40.0/0.0\n"), std::string::npos) << s;
}

}  // namespace
}  // namespace lockvisor::report
