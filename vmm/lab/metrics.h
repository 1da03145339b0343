// The numbers the lab summarises, read from each run's JSON report by name.
// A key missing from a completed run is an error naming the key and the
// point (a renamed counter must not read as 0), unless the metric says it
// may be absent; a key that is present but
// null means "not applicable" (e.g. VMM counters of a native run).
//
// ADDING A METRIC COLUMN = one row in kMetrics (metrics.cpp).
#pragma once
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

namespace lockvisor::lab {

struct Metric {
  const char* name;     // column in summary.csv
  const char* pointer;  // JSON pointer into the run report
  const char* per;      // optional divisor (JSON pointer), else nullptr
  double scale;         // value = scale * report[pointer] (/ report[per])
  const char* unit;
  bool higher_is_better;
  // Also divided by the lab's host time slice (lab.json machine.host_slice.ns,
  // host_slice.h): n/a when the slice is unknown.
  bool in_host_slices;
  // A report without the key reads n/a instead of failing: for figures that
  // reports of older lockvisor versions lack, so their labs still summarise.
  bool may_be_absent = false;
};

std::span<const Metric> metrics();
const Metric* find_metric(const std::string& name);

// The metric's value in one run's report; nullopt when it is null (not
// applicable) or its divisor is 0 (or it is in host slices and
// `host_slice_ns` is unknown). Throws a usage lockvisor::Error naming the key
// and `id` when the key is missing, not a number or negative.
std::optional<double> read_metric(const Metric& m, const nlohmann::json& report, const std::string& id,
                                  std::optional<double> host_slice_ns = std::nullopt);

}  // namespace lockvisor::lab
