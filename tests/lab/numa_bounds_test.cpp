// The summary's NUMA-bound section: which points get a row, and the bound
// each row states with the point's own --param values.
#include <gtest/gtest.h>

#include "vmm/lab/numa_bounds.h"

namespace lockvisor::lab {
namespace {

PointSummary point(const std::string& key, const std::string& lock, const std::string& params,
                   std::vector<double> worst_waits_ns) {
  PointSummary p;
  p.key = key;
  p.settings = {{"lock", lock}};
  if (!params.empty()) p.settings.emplace_back("param", params);
  p.values["latency_max_ns"] = std::move(worst_waits_ns);
  p.estimates["latency_max_ns"].median = p.values["latency_max_ns"].front();
  return p;
}

TEST(LabNumaBounds, NoNumaLockNoSection) {
  Summary s;
  s.points.push_back(point("lock=qspinlock", "qspinlock", "", {1e6}));
  EXPECT_EQ(numa_bounds_markdown(s), "");
}

TEST(LabNumaBounds, EachNumaLockWithItsParams) {
  Summary s;
  s.points.push_back(point("lock=qspinlock", "qspinlock", "", {1e6}));
  s.points.push_back(point("lock=cna", "cna", "", {3e6, 1e6}));
  s.points.push_back(point("lock=pvcna", "pvcna", "cna_threshold=100 cna_threshold_us=500", {2e6}));
  s.points.push_back(point("lock=hq", "hq", "hq_fairness_threshold=50", {5e5}));
  s.points.push_back(point("lock=pvhq", "pvhq", "hq_fairness_threshold_us=250", {5e5}));
  const std::string md = numa_bounds_markdown(s);
  EXPECT_EQ(md.find("| lock=qspinlock "), std::string::npos) << md;
  // The defaults (pvbounded_tuning.h): 2^16 handoffs or 1000 us for CNA;
  // the longest of the runs, and its ratio to the time threshold.
  EXPECT_NE(md.find("| lock=cna | cna | runs of at most 65536 holders or 1000 us | 3.000 (2 runs) | 3.000 | 3.00 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| lock=pvcna | pvcna | runs of at most 100 holders or 500 us | 2.000 (1 run) | 2.000 | 4.00 |"),
            std::string::npos)
      << md;
  // HQ: no time form by default, so no ratio; plus its qspinlock-mode holders.
  EXPECT_NE(md.find("| lock=hq | hq | runs of at most 50 holders (plus one per vCPU of the node) | 0.500 (1 run) | "
                    "0.500 | - |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| lock=pvhq | pvhq | runs of at most 1000 holders (plus one per vCPU of the node) or 250 us |"),
            std::string::npos)
      << md;
}

}  // namespace
}  // namespace lockvisor::lab
