// `lockvisor lab compare BASE OTHER`: whether a second lab of the same
// scenario measured the same thing, point by point: each point's median in
// OTHER against BASE's 95% interval, for the chosen metrics, and the two
// labs' wall times. Made for the question "what does running points side by
// side change?" (the same preset with --jobs 1 and with the default), and
// usable for any two labs of one scenario (two hosts, two versions).
#pragma once
#include <cstdio>
#include <string>
#include <vector>

namespace lockvisor::lab {

// The metric compared when none is named.
inline constexpr const char* kCompareDefaultMetric = "ops_per_sec";

// Exit code when some compared median of OTHER lies outside BASE's interval
// (0: all inside; a usage error is 2, as everywhere).
inline constexpr int kCompareOutsideExit = 1;

// Prints the comparison to `out` (markdown: a headline with both wall times
// and what differs between the two labs' plans, a table per metric, a
// verdict line per metric) and returns 0 or kCompareOutsideExit. Points are
// matched by key (the matrix cell); a point with no completed run in one of
// the labs is listed as not compared. Throws a usage lockvisor::Error when a
// directory is no lab, a metric is unknown, or no point can be compared.
int compare_labs(const std::string& base, const std::string& other, const std::vector<std::string>& metrics,
                 std::FILE* out);

}  // namespace lockvisor::lab
