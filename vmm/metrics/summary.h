// Summary statistics for lock benchmarks: latency percentiles and the
// fairness of per-thread operation counts.
//
// Percentile method (used here and by Histogram::percentile): NEAREST RANK.
// For n samples sorted ascending x[1..n], the p-th percentile (p in [0, 100])
// is x[r] with r = max(1, ceil(p/100 * n)). The result is always one of the
// samples (no interpolation), p = 0 gives the minimum and p = 100 the maximum;
// e.g. for 1..100, p50 = 50, p90 = 90, p99 = 99, p99.9 = 100.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace lockvisor::metrics {

// The 1-based nearest rank of percentile p among n > 0 samples, in [1, n].
// Tolerates floating-point noise in p * n / 100 (so p = 99.9 of n = 1000 is
// rank 999, not 1000). Throws lockvisor::Error if p is not in [0, 100].
std::size_t nearest_rank(std::size_t n, double p);

// Nearest-rank percentile of `samples` (any order; taken by value because it
// is sorted). std::nullopt if there are no samples. Throws lockvisor::Error if
// p is not in [0, 100] (including NaN).
std::optional<double> percentile(std::vector<uint64_t> samples, double p);

// The same for samples already sorted ascending (not checked), without a copy.
std::optional<double> percentile_sorted(std::span<const uint64_t> sorted, double p);

struct LatencySummary {
  uint64_t count;  // number of samples; 0 means "no samples" and every other field is 0
  double p50, p90, p99, p999, max, mean;
};

// Summary of latency samples (any order, any unit). An empty input gives an
// all-zero summary with count == 0, so it can always be reported.
LatencySummary summarize_latency(std::vector<uint64_t> samples);

// Readings of a "fairness factor" that a source reports without defining it
// (Stepanov, Fedorov, "[RFC] HQ spinlock", LKML, Nov 2025: values of about
// 0.5 from locktorture; docs/measurements.md says which reading gives such
// values and why). Jain's index and the coefficient of variation, the other
// candidates, are members of Fairness and Spread. Each field is one
// definition over the per-thread values x_1..x_n (counts or rates):
struct FairnessFactors {
  // min / max, in [0, 1]: 1 when every thread did the same, 0 when some
  // thread did nothing (locktorture prints max and min and flags "???" when
  // max > 2 * min, i.e. when this is below 0.5). The reciprocal of
  // max_min_ratio, but finite when min is 0.
  double min_over_max;
  // mean / max, in [1/n, 1]: the reciprocal of max/mean (which is >= 1 and so
  // cannot read 0.5); 1 when even, 1/n when one thread did everything.
  double mean_over_max;
  // The share of all work done by the slowest half of the threads (for odd n
  // the median thread counts half), in [0, 0.5]: 0.5 when even, 0 when the
  // busier half did everything. 1 minus it is the busiest half's share.
  double slowest_half_share;
};
// All values 0: every reading is that of an even spread (1, 1, 0.5). The
// values must be finite and non-negative (not checked here); empty input is a
// caller bug and throws lockvisor::Error.
FairnessFactors fairness_factors(std::span<const long double> values);

// How evenly work was spread over threads, from per-thread operation counts.
struct Fairness {
  // Jain's fairness index (sum x)^2 / (n * sum x^2), in [1/n, 1]: 1 when all
  // threads did the same amount, 1/n when one thread did everything. Defined
  // as 1 when every count is 0 (nobody was favoured).
  double jain;
  // max / min. std::nullopt when min == 0 (the ratio is infinite, or 0/0),
  // because JSON cannot represent infinity.
  std::optional<double> max_min_ratio;
  // Coefficient of variation: population standard deviation / mean (0 is
  // perfectly even). Defined as 0 when every count is 0.
  double cv;
  uint64_t min;
  uint64_t max;
  FairnessFactors factors;
};

// std::nullopt for no threads; a single thread is perfectly fair (jain 1,
// cv 0, ratio 1 unless its count is 0).
std::optional<Fairness> compute_fairness(std::span<const uint64_t> per_thread_ops);

// The same figures for real-valued per-thread quantities (rates, finish
// times): Jain's index, cv, min, max, max/min (nullopt when min <= 0) and
// the fairness-factor readings.
// All zero values: Jain 1, cv 0. std::nullopt for no values; negative or
// non-finite values are a caller bug and throw lockvisor::Error.
struct Spread {
  double jain;
  double cv;
  double min;
  double max;
  std::optional<double> max_min_ratio;
  FairnessFactors factors;
};
std::optional<Spread> compute_spread(std::span<const double> values);

// locktorture's starvation flag: true when the busiest thread did more than
// twice the work of the least busy one (max > 2 * min, computed without
// overflow). locktorture prints "???" for the integer form max / 2 > min,
// which differs only when max is odd. False for no threads.
bool imbalanced(std::span<const uint64_t> per_thread_ops);

}  // namespace lockvisor::metrics
