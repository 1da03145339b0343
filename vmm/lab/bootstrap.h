// Medians with 95% bootstrap confidence intervals, and the ratio of two
// medians with its interval: whether a difference is beyond the spread.
//
// Percentile bootstrap: resample the n values with replacement kResamples
// times, take each resample's median, and report the 2.5th and 97.5th
// percentiles of those medians. The generator is seeded by the caller (the
// lab seeds it from the point's key), so the same data always give the same
// interval. With n = 1 the interval is the value itself: no spread is known.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace lockvisor::lab {

inline constexpr unsigned kResamples = 2000;

struct Estimate {
  double median = 0;
  double lo = 0;  // 95% interval
  double hi = 0;
  std::size_t n = 0;
};

// Median of the values (mean of the middle two for even n). Needs n >= 1.
double median(std::vector<double> values);

Estimate bootstrap_median(std::span<const double> values, std::uint64_t seed);

// median(a) / median(b), the interval from resampling both independently.
// Needs both non-empty and median(b) != 0 in every resample (else lo/hi are
// infinite).
Estimate bootstrap_ratio(std::span<const double> a, std::span<const double> b, std::uint64_t seed);

// "a>b" if the ratio's interval lies above `factor` (a claim's a against
// factor x b; 1 compares a with b itself), "a<b" if below, else "a~b".
const char* ratio_verdict(const Estimate& ratio, double factor = 1);

}  // namespace lockvisor::lab
