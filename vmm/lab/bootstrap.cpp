#include "vmm/lab/bootstrap.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace lockvisor::lab {
namespace {

std::vector<double> resample_medians(std::span<const double> values, std::mt19937_64& rng) {
  std::vector<double> medians;
  medians.reserve(kResamples);
  std::uniform_int_distribution<std::size_t> pick(0, values.size() - 1);
  std::vector<double> sample(values.size());
  for (unsigned r = 0; r < kResamples; ++r) {
    for (auto& v : sample) v = values[pick(rng)];
    medians.push_back(median(sample));
  }
  return medians;
}

// Nearest-rank percentile of sorted values, as vmm/metrics/summary.h does.
double percentile_sorted(const std::vector<double>& sorted, double p) {
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::max<std::size_t>(rank, 1) - 1];
}

}  // namespace

double median(std::vector<double> values) {
  const auto n = values.size();
  std::sort(values.begin(), values.end());
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

Estimate bootstrap_median(std::span<const double> values, std::uint64_t seed) {
  Estimate e;
  e.n = values.size();
  if (values.empty()) return e;
  e.median = median({values.begin(), values.end()});
  std::mt19937_64 rng(seed);
  auto medians = resample_medians(values, rng);
  std::sort(medians.begin(), medians.end());
  e.lo = percentile_sorted(medians, 2.5);
  e.hi = percentile_sorted(medians, 97.5);
  return e;
}

Estimate bootstrap_ratio(std::span<const double> a, std::span<const double> b, std::uint64_t seed) {
  Estimate e;
  e.n = std::min(a.size(), b.size());
  if (a.empty() || b.empty()) return e;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  auto ratio = [&](double x, double y) { return y != 0 ? x / y : (x > 0 ? kInf : 1.0); };
  e.median = ratio(median({a.begin(), a.end()}), median({b.begin(), b.end()}));
  std::mt19937_64 rng(seed);
  const auto ma = resample_medians(a, rng);
  const auto mb = resample_medians(b, rng);
  std::vector<double> ratios(kResamples);
  for (unsigned r = 0; r < kResamples; ++r) ratios[r] = ratio(ma[r], mb[r]);
  std::sort(ratios.begin(), ratios.end());
  e.lo = percentile_sorted(ratios, 2.5);
  e.hi = percentile_sorted(ratios, 97.5);
  return e;
}

const char* ratio_verdict(const Estimate& ratio, double factor) {
  if (ratio.lo > factor) return "a>b";
  if (ratio.hi < factor) return "a<b";
  return "a~b";
}

}  // namespace lockvisor::lab
