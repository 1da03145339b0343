// What a lab's results say: per point (all repeats of one matrix cell) the
// median and 95% bootstrap interval of every metric over the completed
// runs, the outcomes of all runs, and each scenario claim checked against
// them. Written as summary.csv (one row per point, for scripts and
// tools/lab-plot.py) and summary.md (for people).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vmm/lab/bootstrap.h"
#include "vmm/lab/matrix.h"
#include "vmm/lab/scenario.h"

namespace lockvisor::lab {

struct PointSummary {
  std::string key;
  std::vector<std::pair<std::string, std::string>> labels;
  SettingValues settings;
  std::string series;       // the key without the axes that set vcpus/pcpus: one line in a plot
  double overcommit = 0;    // vCPUs per host CPU
  std::size_t runs = 0;
  std::map<std::string, unsigned> outcomes;      // outcome -> runs
  std::map<std::string, std::vector<double>> values;  // metric -> completed runs' values
  std::map<std::string, Estimate> estimates;          // metric -> median and interval
};

struct ClaimResult {
  const Claim* claim = nullptr;
  std::vector<std::string> findings;  // one per compared group: what was measured
  std::string verdict;                // holds, contradicted, within the spread, no data
};

struct Summary {
  std::vector<PointSummary> points;
  std::vector<ClaimResult> claims;
  std::size_t records = 0;
};

// `host_cpus` counts the CPUs a point without a pcpus setting may use;
// `host_slice_ns` (lab.json machine.host_slice.ns) converts waits to host
// time slices, which are n/a without it.
Summary summarize(const Scenario& s, const std::vector<nlohmann::json>& records, unsigned host_cpus,
                  std::optional<double> host_slice_ns = std::nullopt);

// A number as the summaries print it: three significant digits for large
// values, enough decimals that small ones (exits per acquisition) stay visible.
std::string fmt_num(double v);

std::string summary_csv(const Summary& summary);
std::string summary_markdown(const Scenario& s, const Summary& summary);

}  // namespace lockvisor::lab
