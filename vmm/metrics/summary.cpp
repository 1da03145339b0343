#include "vmm/metrics/summary.h"

#include <algorithm>
#include <cmath>

#include "vmm/util/error.h"

namespace lockvisor::metrics {

std::size_t nearest_rank(std::size_t n, double p) {
  // Written so that NaN fails the test too.
  if (!(p >= 0.0 && p <= 100.0)) fail("percentile {} is outside [0, 100]", p);
  if (n == 0) return 0;
  // p * n / 100 rather than p / 100 * n: for integral p this is exact. For p
  // like 99.9 the product can land a hair above an integer (99900.00000001),
  // which must not push the rank up by one, hence the relative tolerance.
  const double exact = p * static_cast<double>(n) / 100.0;
  double rank = std::ceil(exact);
  if (rank - exact > 1.0 - 1e-9 * std::max(1.0, exact)) rank -= 1.0;  // exact was k + noise
  return std::clamp<std::size_t>(static_cast<std::size_t>(rank), 1, n);
}

std::optional<double> percentile_sorted(std::span<const uint64_t> sorted, double p) {
  const std::size_t rank = nearest_rank(sorted.size(), p);  // validates p even when empty
  if (sorted.empty()) return std::nullopt;
  return static_cast<double>(sorted[rank - 1]);
}

std::optional<double> percentile(std::vector<uint64_t> samples, double p) {
  std::ranges::sort(samples);
  return percentile_sorted(samples, p);
}

LatencySummary summarize_latency(std::vector<uint64_t> samples) {
  LatencySummary s{};
  if (samples.empty()) return s;
  std::ranges::sort(samples);
  // 128-bit sum: n samples of up to 2^64 - 1 cannot overflow it for any n
  // that fits in memory.
  unsigned __int128 sum = 0;
  for (uint64_t v : samples) sum += v;
  s.count = samples.size();
  s.p50 = *percentile_sorted(samples, 50);
  s.p90 = *percentile_sorted(samples, 90);
  s.p99 = *percentile_sorted(samples, 99);
  s.p999 = *percentile_sorted(samples, 99.9);
  s.max = static_cast<double>(samples.back());
  s.mean = static_cast<double>(static_cast<long double>(sum) / static_cast<long double>(samples.size()));
  return s;
}

FairnessFactors fairness_factors(std::span<const long double> values) {
  if (values.empty()) fail("fairness_factors: no values");
  std::vector<long double> sorted(values.begin(), values.end());
  std::ranges::sort(sorted);
  const std::size_t n = sorted.size();
  long double sum = 0;
  for (long double v : sorted) sum += v;
  const long double max = sorted.back();
  if (max == 0) return {1.0, 1.0, 0.5};
  long double slow = 0;
  for (std::size_t i = 0; i < n / 2; ++i) slow += sorted[i];
  if (n % 2 == 1) slow += sorted[n / 2] / 2;  // the median thread is half in each half
  return {static_cast<double>(sorted.front() / max),
          static_cast<double>(sum / static_cast<long double>(n) / max),
          static_cast<double>(slow / sum)};
}

std::optional<Fairness> compute_fairness(std::span<const uint64_t> per_thread_ops) {
  if (per_thread_ops.empty()) return std::nullopt;
  const auto [min_it, max_it] = std::ranges::minmax_element(per_thread_ops);
  Fairness f{};
  f.min = *min_it;
  f.max = *max_it;
  f.max_min_ratio = f.min == 0 ? std::nullopt
                               : std::optional<double>(static_cast<double>(f.max) / static_cast<double>(f.min));
  {
    std::vector<long double> wide(per_thread_ops.begin(), per_thread_ops.end());
    f.factors = fairness_factors(wide);
  }
  if (f.max == 0) {  // all zero: nothing ran, and no thread was favoured
    f.jain = 1.0;
    f.cv = 0.0;
    return f;
  }
  // long double: squares of 64-bit counts exceed 2^64, and the extra mantissa
  // bits keep Jain's index of an even distribution at exactly 1.
  const auto n = static_cast<long double>(per_thread_ops.size());
  long double sum = 0, sum_sq = 0;
  for (uint64_t x : per_thread_ops) {
    const auto v = static_cast<long double>(x);
    sum += v;
    sum_sq += v * v;
  }
  f.jain = static_cast<double>(sum * sum / (n * sum_sq));
  // Two-pass variance (around the mean) avoids the cancellation of
  // sum_sq / n - mean^2 when the counts are large and close together.
  const long double mean = sum / n;
  long double dev_sq = 0;
  for (uint64_t x : per_thread_ops) {
    const long double d = static_cast<long double>(x) - mean;
    dev_sq += d * d;
  }
  f.cv = static_cast<double>(std::sqrt(dev_sq / n) / mean);
  return f;
}

bool imbalanced(std::span<const uint64_t> per_thread_ops) {
  if (per_thread_ops.empty()) return false;
  const auto [min_it, max_it] = std::ranges::minmax_element(per_thread_ops);
  // max > 2 * min  <=>  max - min > min, and max - min cannot underflow.
  return *max_it - *min_it > *min_it;
}

std::optional<Spread> compute_spread(std::span<const double> values) {
  if (values.empty()) return std::nullopt;
  for (double v : values)
    if (!std::isfinite(v) || v < 0) fail("compute_spread: value {} is not a finite non-negative number", v);
  const auto [min_it, max_it] = std::ranges::minmax_element(values);
  Spread s{1.0, 0.0, *min_it, *max_it, std::nullopt, {}};
  if (s.min > 0) s.max_min_ratio = s.max / s.min;
  {
    std::vector<long double> wide(values.begin(), values.end());
    s.factors = fairness_factors(wide);
  }
  if (s.max == 0) return s;
  const auto n = static_cast<long double>(values.size());
  long double sum = 0, sum_sq = 0;
  for (double x : values) {
    sum += x;
    sum_sq += static_cast<long double>(x) * x;
  }
  s.jain = static_cast<double>(sum * sum / (n * sum_sq));
  const long double mean = sum / n;
  long double dev_sq = 0;
  for (double x : values) dev_sq += (x - mean) * (x - mean);
  s.cv = static_cast<double>(std::sqrt(dev_sq / n) / mean);
  return s;
}

}  // namespace lockvisor::metrics
