// Tests for metrics::percentile / summarize_latency / compute_fairness /
// imbalanced and the log-linear Histogram, against hand-computed values.
// One file (over 500 lines): vmm/metrics is one subject, the statistics
// every report prints (with spread, window fairness and thread usage), and
// the histogram's percentiles are checked against the exact percentile
// tested above them, so the two stay side by side.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "vmm/metrics/histogram.h"
#include "vmm/metrics/summary.h"
#include "vmm/metrics/thread_usage.h"
#include "vmm/metrics/window_fairness.h"
#include "vmm/util/error.h"

namespace lockvisor::metrics {
namespace {

std::vector<uint64_t> iota_from_1(uint64_t n) {
  std::vector<uint64_t> v(n);
  std::iota(v.begin(), v.end(), uint64_t{1});
  return v;
}

// --- percentile ------------------------------------------------------------------

TEST(Percentile, EmptyIsNullopt) {
  EXPECT_FALSE(percentile({}, 50).has_value());
  EXPECT_FALSE(percentile_sorted({}, 0).has_value());
}

TEST(Percentile, NearestRankOfOneToHundred) {
  const auto v = iota_from_1(100);
  EXPECT_EQ(percentile(v, 0), 1.0);
  EXPECT_EQ(percentile(v, 0.5), 1.0);
  EXPECT_EQ(percentile(v, 1), 1.0);
  EXPECT_EQ(percentile(v, 1.01), 2.0);
  EXPECT_EQ(percentile(v, 25), 25.0);
  EXPECT_EQ(percentile(v, 50), 50.0);
  EXPECT_EQ(percentile(v, 90), 90.0);
  EXPECT_EQ(percentile(v, 99), 99.0);
  EXPECT_EQ(percentile(v, 99.9), 100.0);
  EXPECT_EQ(percentile(v, 100), 100.0);
}

TEST(Percentile, OrderDoesNotMatter) {
  auto v = iota_from_1(100);
  std::mt19937_64 rng(7);
  std::shuffle(v.begin(), v.end(), rng);
  EXPECT_EQ(percentile(v, 50), 50.0);
  EXPECT_EQ(percentile(v, 99), 99.0);
  std::reverse(v.begin(), v.end());
  EXPECT_EQ(percentile(v, 10), 10.0);
}

TEST(Percentile, SingleSampleIsEveryPercentile) {
  for (double p : {0.0, 50.0, 99.999, 100.0}) EXPECT_EQ(percentile({42}, p), 42.0) << p;
}

TEST(Percentile, FractionalRanksAreNotPushedUpByRoundingNoise) {
  // 99.9 * 1000 / 100 is 999 up to floating-point noise: rank 999, not 1000.
  const auto v = iota_from_1(1000);
  EXPECT_EQ(percentile(v, 99.9), 999.0);
  EXPECT_EQ(percentile(iota_from_1(10000), 99.99), 9999.0);
  EXPECT_EQ(percentile(iota_from_1(10), 70), 7.0);
  EXPECT_EQ(nearest_rank(3, 100.0 / 3), 1u);  // p * n / 100 is 1 give or take an ulp
}

TEST(Percentile, RejectsOutOfRangeP) {
  const auto v = iota_from_1(10);
  EXPECT_THROW(percentile(v, -0.001), Error);
  EXPECT_THROW(percentile(v, 100.5), Error);
  EXPECT_THROW(percentile(v, std::numeric_limits<double>::quiet_NaN()), Error);
  EXPECT_THROW(percentile({}, 101), Error);  // validated even without samples
}

TEST(Percentile, NearestRankBounds) {
  EXPECT_EQ(nearest_rank(0, 50), 0u);
  EXPECT_EQ(nearest_rank(1, 0), 1u);
  EXPECT_EQ(nearest_rank(1, 100), 1u);
  EXPECT_EQ(nearest_rank(7, 100), 7u);
  EXPECT_EQ(nearest_rank(7, 1e-300), 1u);
}

// --- summarize_latency -----------------------------------------------------------

TEST(LatencySummary, OneToThousand) {
  auto v = iota_from_1(1000);
  std::reverse(v.begin(), v.end());
  const LatencySummary s = summarize_latency(v);
  EXPECT_EQ(s.count, 1000u);
  EXPECT_EQ(s.p50, 500.0);
  EXPECT_EQ(s.p90, 900.0);
  EXPECT_EQ(s.p99, 990.0);
  EXPECT_EQ(s.p999, 999.0);
  EXPECT_EQ(s.max, 1000.0);
  EXPECT_DOUBLE_EQ(s.mean, 500.5);
}

TEST(LatencySummary, EmptyIsAllZero) {
  const LatencySummary s = summarize_latency({});
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.p50, 0.0);
  EXPECT_EQ(s.p999, 0.0);
  EXPECT_EQ(s.max, 0.0);
  EXPECT_EQ(s.mean, 0.0);
}

TEST(LatencySummary, MeanDoesNotOverflow) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  const LatencySummary s = summarize_latency({kMax, kMax, kMax});
  EXPECT_DOUBLE_EQ(s.mean, static_cast<double>(kMax));
  EXPECT_DOUBLE_EQ(s.max, static_cast<double>(kMax));
}

// --- compute_fairness / imbalanced ---------------------------------------------------

TEST(Fairness, JainIndexKnownValues) {
  EXPECT_DOUBLE_EQ(compute_fairness(std::vector<uint64_t>{1, 1, 1, 1})->jain, 1.0);
  EXPECT_DOUBLE_EQ(compute_fairness(std::vector<uint64_t>{1, 0, 0, 0})->jain, 0.25);
  // (1+2+3+4)^2 / (4 * (1+4+9+16)) = 100 / 120.
  EXPECT_DOUBLE_EQ(compute_fairness(std::vector<uint64_t>{1, 2, 3, 4})->jain, 100.0 / 120.0);
  // Scale-invariant, and exact for large equal counts.
  EXPECT_DOUBLE_EQ(compute_fairness(std::vector<uint64_t>{3000000000, 3000000000})->jain, 1.0);
  EXPECT_DOUBLE_EQ(compute_fairness(std::vector<uint64_t>{1ull << 62, 1ull << 62, 1ull << 62})->jain, 1.0);
}

TEST(Fairness, CoefficientOfVariationIsPopulationBased) {
  // mean 5, population variance 32/8 = 4, stddev 2, cv 0.4.
  const auto f = compute_fairness(std::vector<uint64_t>{2, 4, 4, 4, 5, 5, 7, 9});
  ASSERT_TRUE(f.has_value());
  EXPECT_DOUBLE_EQ(f->cv, 0.4);
  EXPECT_DOUBLE_EQ(compute_fairness(std::vector<uint64_t>{7, 7, 7})->cv, 0.0);
  // {1, 0, 0, 0}: mean 1/4, stddev sqrt(3)/4, cv sqrt(3).
  EXPECT_DOUBLE_EQ(compute_fairness(std::vector<uint64_t>{1, 0, 0, 0})->cv, std::sqrt(3.0));
}

TEST(Fairness, MaxMinRatio) {
  const auto f = compute_fairness(std::vector<uint64_t>{4, 1, 3, 2});
  ASSERT_TRUE(f->max_min_ratio.has_value());
  EXPECT_DOUBLE_EQ(*f->max_min_ratio, 4.0);
  EXPECT_EQ(f->min, 1u);
  EXPECT_EQ(f->max, 4u);
  // min == 0: the ratio is infinite, reported as absent.
  EXPECT_FALSE(compute_fairness(std::vector<uint64_t>{5, 0})->max_min_ratio.has_value());
}

TEST(Fairness, EdgeCases) {
  EXPECT_FALSE(compute_fairness({}).has_value());

  const auto zeros = compute_fairness(std::vector<uint64_t>{0, 0, 0});
  ASSERT_TRUE(zeros.has_value());
  EXPECT_EQ(zeros->jain, 1.0);
  EXPECT_EQ(zeros->cv, 0.0);
  EXPECT_FALSE(zeros->max_min_ratio.has_value());
  EXPECT_EQ(zeros->max, 0u);

  const auto single = compute_fairness(std::vector<uint64_t>{17});
  ASSERT_TRUE(single.has_value());
  EXPECT_EQ(single->jain, 1.0);
  EXPECT_EQ(single->cv, 0.0);
  EXPECT_EQ(single->max_min_ratio, 1.0);

  const auto single_zero = compute_fairness(std::vector<uint64_t>{0});
  EXPECT_EQ(single_zero->jain, 1.0);
  EXPECT_FALSE(single_zero->max_min_ratio.has_value());
}

// --- fairness_factors: the readings of an undefined "fairness factor" ------------

TEST(FairnessFactors, KnownVectors) {
  // 1, 2, 3, 4 (any order): min/max 1/4, mean/max 2.5/4, slowest half (1+2)/10.
  const auto f = compute_fairness(std::vector<uint64_t>{4, 1, 3, 2})->factors;
  EXPECT_DOUBLE_EQ(f.min_over_max, 0.25);
  EXPECT_DOUBLE_EQ(f.mean_over_max, 0.625);
  EXPECT_DOUBLE_EQ(f.slowest_half_share, 0.3);
  // Even: every reading is that of perfect fairness.
  const auto even = compute_fairness(std::vector<uint64_t>{7, 7, 7, 7})->factors;
  EXPECT_DOUBLE_EQ(even.min_over_max, 1.0);
  EXPECT_DOUBLE_EQ(even.mean_over_max, 1.0);
  EXPECT_DOUBLE_EQ(even.slowest_half_share, 0.5);
  // One thread did everything: 0, 1/n, 0.
  const auto one = compute_fairness(std::vector<uint64_t>{0, 9, 0, 0})->factors;
  EXPECT_DOUBLE_EQ(one.min_over_max, 0.0);
  EXPECT_DOUBLE_EQ(one.mean_over_max, 0.25);
  EXPECT_DOUBLE_EQ(one.slowest_half_share, 0.0);
  // Odd n: the median thread counts half in each half: (1 + 2/2) / 6.
  const auto odd = compute_fairness(std::vector<uint64_t>{3, 1, 2})->factors;
  EXPECT_DOUBLE_EQ(odd.slowest_half_share, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(odd.min_over_max, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(odd.mean_over_max, 2.0 / 3.0);
  // locktorture's "???" boundary: the busiest did twice the slowest. The
  // readings disagree widely on the same run (Jain 0.9 here).
  const auto twice = compute_fairness(std::vector<uint64_t>{2, 1});
  EXPECT_DOUBLE_EQ(twice->factors.min_over_max, 0.5);
  EXPECT_DOUBLE_EQ(twice->jain, 0.9);
  EXPECT_DOUBLE_EQ(twice->factors.slowest_half_share, 1.0 / 3.0);
}

TEST(FairnessFactors, EdgeCasesAndRates) {
  for (const auto& f : {compute_fairness(std::vector<uint64_t>{0, 0, 0})->factors,
                        compute_fairness(std::vector<uint64_t>{17})->factors,
                        compute_spread(std::vector<double>{0.0, 0.0})->factors}) {
    EXPECT_DOUBLE_EQ(f.min_over_max, 1.0);
    EXPECT_DOUBLE_EQ(f.mean_over_max, 1.0);
    EXPECT_DOUBLE_EQ(f.slowest_half_share, 0.5);
  }
  EXPECT_THROW(fairness_factors({}), Error);
  // The same readings over real-valued rates.
  const auto s = compute_spread(std::vector<double>{1.0, 2.0, 3.0, 4.0})->factors;
  EXPECT_DOUBLE_EQ(s.min_over_max, 0.25);
  EXPECT_DOUBLE_EQ(s.mean_over_max, 0.625);
  EXPECT_DOUBLE_EQ(s.slowest_half_share, 0.3);
  // Counts too large for a double's mantissa still read as even.
  const auto big = compute_fairness(std::vector<uint64_t>{(1ull << 62) + 1, (1ull << 62) + 1})->factors;
  EXPECT_DOUBLE_EQ(big.min_over_max, 1.0);
  EXPECT_DOUBLE_EQ(big.slowest_half_share, 0.5);
}

TEST(Imbalanced, MaxMoreThanTwiceMin) {
  EXPECT_FALSE(imbalanced(std::vector<uint64_t>{}));
  EXPECT_FALSE(imbalanced(std::vector<uint64_t>{5}));
  EXPECT_FALSE(imbalanced(std::vector<uint64_t>{0, 0}));
  EXPECT_FALSE(imbalanced(std::vector<uint64_t>{10, 5, 7}));  // exactly twice: not flagged
  EXPECT_TRUE(imbalanced(std::vector<uint64_t>{11, 5, 7}));
  EXPECT_TRUE(imbalanced(std::vector<uint64_t>{1, 0}));
  // Near the top of the range, where 2 * min would overflow.
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  EXPECT_TRUE(imbalanced(std::vector<uint64_t>{kMax, kMax / 2}));       // 2 * min = kMax - 1
  EXPECT_FALSE(imbalanced(std::vector<uint64_t>{kMax, kMax / 2 + 1}));  // 2 * min = 2^64
}

// --- Histogram ---------------------------------------------------------------------

TEST(Histogram, EmptyHistogram) {
  const Histogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_FALSE(h.min().has_value());
  EXPECT_FALSE(h.max().has_value());
  EXPECT_FALSE(h.mean().has_value());
  EXPECT_FALSE(h.percentile(50).has_value());
  EXPECT_EQ(h.summary().count, 0u);
  EXPECT_EQ(h.summary().p99, 0.0);
  EXPECT_THROW(h.percentile(-1), Error);
}

TEST(Histogram, BucketGeometry) {
  static_assert(Histogram::kBucketCount == 976);
  // Buckets tile [0, 2^64) in order, without gaps or overlaps, and each
  // bucket's width is at most 1/16 of its lowest value (beyond the exact ones).
  EXPECT_EQ(Histogram::bucket_lowest(0), 0u);
  for (std::size_t i = 0; i < Histogram::kBucketCount; ++i) {
    const uint64_t lo = Histogram::bucket_lowest(i);
    const uint64_t hi = Histogram::bucket_highest(i);
    ASSERT_LE(lo, hi) << i;
    ASSERT_EQ(Histogram::bucket_index(lo), i);
    ASSERT_EQ(Histogram::bucket_index(hi), i);
    if (i + 1 < Histogram::kBucketCount) {
      ASSERT_EQ(hi + 1, Histogram::bucket_lowest(i + 1)) << i;
    }
    if (i >= Histogram::kSubBuckets) {
      ASSERT_LE(hi - lo + 1, lo / Histogram::kSubBuckets) << i;
    }
  }
  EXPECT_EQ(Histogram::bucket_highest(Histogram::kBucketCount - 1), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(Histogram::bucket_index(15), 15u);
  EXPECT_EQ(Histogram::bucket_index(16), 16u);
  EXPECT_EQ(Histogram::bucket_index(31), 31u);
  EXPECT_EQ(Histogram::bucket_index(32), 32u);
  EXPECT_EQ(Histogram::bucket_index(33), 32u);  // width 2 from 32 on
}

TEST(Histogram, SmallValuesAreExact) {
  Histogram h;
  for (uint64_t v = 0; v < 16; ++v) h.record(v);
  EXPECT_EQ(h.count(), 16u);
  EXPECT_EQ(h.percentile(0), 0u);
  EXPECT_EQ(h.percentile(50), 7u);  // rank 8 of 0..15
  EXPECT_EQ(h.percentile(100), 15u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 15u);
  EXPECT_DOUBLE_EQ(*h.mean(), 7.5);
}

TEST(Histogram, ExtremesAreExactAndClampPercentiles) {
  Histogram h;
  h.record(1000003);
  EXPECT_EQ(h.percentile(0), 1000003u);  // the midpoint is clamped into [min, max]
  EXPECT_EQ(h.percentile(100), 1000003u);
  h.record(std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(h.max(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(h.percentile(100), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(h.min(), 1000003u);
}

// A deterministic, heavy-tailed sample: log-uniform over [1, 2^40) ns.
std::vector<uint64_t> latency_like_sample(std::size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> v(n);
  for (auto& x : v) {
    const unsigned bits = 1 + static_cast<unsigned>(rng() % 40);
    x = (rng() & ((uint64_t{1} << bits) - 1)) | (uint64_t{1} << (bits - 1));
  }
  return v;
}

TEST(Histogram, PercentilesWithinStatedRelativeError) {
  const auto samples = latency_like_sample(200000, 42);
  Histogram h;
  for (uint64_t v : samples) h.record(v);
  auto sorted = samples;
  std::sort(sorted.begin(), sorted.end());

  for (double p : {0.0, 0.1, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
    const double exact = *percentile_sorted(sorted, p);
    const auto approx = static_cast<double>(*h.percentile(p));
    EXPECT_LE(std::abs(approx - exact), exact * Histogram::kMaxRelativeError)
        << "p" << p << ": exact " << exact << ", histogram " << approx;
  }
  EXPECT_EQ(h.count(), samples.size());
  EXPECT_EQ(h.min(), sorted.front());
  EXPECT_EQ(h.max(), sorted.back());
  const double exact_mean =
      static_cast<double>(std::accumulate(samples.begin(), samples.end(), uint64_t{0})) / samples.size();
  EXPECT_DOUBLE_EQ(*h.mean(), exact_mean);

  // summary() reports the same percentiles and the exact max and mean.
  const LatencySummary s = h.summary();
  EXPECT_EQ(s.count, samples.size());
  EXPECT_EQ(s.p99, static_cast<double>(*h.percentile(99)));
  EXPECT_EQ(s.max, static_cast<double>(sorted.back()));
  EXPECT_DOUBLE_EQ(s.mean, exact_mean);
}

TEST(Histogram, MergeEqualsRecordingEverything) {
  const auto a = latency_like_sample(5000, 1);
  const auto b = latency_like_sample(7000, 2);
  Histogram ha, hb, all;
  for (uint64_t v : a) ha.record(v), all.record(v);
  for (uint64_t v : b) hb.record(v), all.record(v);
  ha.merge(hb);
  EXPECT_EQ(ha.count(), all.count());
  EXPECT_EQ(ha.min(), all.min());
  EXPECT_EQ(ha.max(), all.max());
  EXPECT_EQ(ha.mean(), all.mean());
  for (std::size_t i = 0; i < Histogram::kBucketCount; ++i) ASSERT_EQ(ha.bucket_count(i), all.bucket_count(i)) << i;
  for (double p : {1.0, 50.0, 99.0}) EXPECT_EQ(ha.percentile(p), all.percentile(p)) << p;

  // Merging an empty histogram changes nothing (in particular not min/max).
  const Histogram empty;
  ha.merge(empty);
  EXPECT_EQ(ha.count(), all.count());
  EXPECT_EQ(ha.min(), all.min());
  EXPECT_EQ(ha.max(), all.max());

  // Merging into an empty one copies.
  Histogram copy;
  copy.merge(all);
  EXPECT_EQ(copy.count(), all.count());
  EXPECT_EQ(copy.min(), all.min());
  EXPECT_EQ(copy.percentile(90), all.percentile(90));
}

TEST(Histogram, Reset) {
  Histogram h;
  h.record(5);
  h.record(500);
  h.reset();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_FALSE(h.min().has_value());
  EXPECT_FALSE(h.percentile(50).has_value());
  h.record(9);
  EXPECT_EQ(h.min(), 9u);
  EXPECT_EQ(h.max(), 9u);
}

TEST(Histogram, ConcurrentRecordingFromFourThreads) {
  constexpr int kThreads = 4;
  constexpr uint64_t kPerThread = 100000;
  Histogram h;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    // Thread t records t*kPerThread + 1 .. (t+1)*kPerThread, so together the
    // threads record exactly 1..400000.
    threads.emplace_back([&h, t] {
      for (uint64_t i = 1; i <= kPerThread; ++i) h.record(t * kPerThread + i);
    });
  }
  for (auto& th : threads) th.join();

  constexpr uint64_t kN = kThreads * kPerThread;
  EXPECT_EQ(h.count(), kN);
  EXPECT_EQ(h.min(), 1u);
  EXPECT_EQ(h.max(), kN);
  EXPECT_DOUBLE_EQ(*h.mean(), (kN + 1) / 2.0);
  // Bucket by bucket, the counts are those of a sequential recording.
  Histogram sequential;
  for (uint64_t v = 1; v <= kN; ++v) sequential.record(v);
  for (std::size_t i = 0; i < Histogram::kBucketCount; ++i) {
    ASSERT_EQ(h.bucket_count(i), sequential.bucket_count(i)) << i;
  }
  const double median = static_cast<double>(*h.percentile(50));
  EXPECT_LE(std::abs(median - kN / 2.0), kN / 2.0 * Histogram::kMaxRelativeError);
}

// ---- compute_spread (real-valued rates and finish times)

TEST(Spread, HandComputed) {
  const std::vector<double> v = {1.0, 2.0, 3.0, 4.0};
  const auto s = compute_spread(v);
  ASSERT_TRUE(s);
  // (1+2+3+4)^2 / (4 * (1+4+9+16)) = 100 / 120
  EXPECT_NEAR(s->jain, 100.0 / 120.0, 1e-12);
  // mean 2.5, population variance 1.25
  EXPECT_NEAR(s->cv, std::sqrt(1.25) / 2.5, 1e-12);
  EXPECT_EQ(s->min, 1.0);
  EXPECT_EQ(s->max, 4.0);
  ASSERT_TRUE(s->max_min_ratio);
  EXPECT_DOUBLE_EQ(*s->max_min_ratio, 4.0);
}

TEST(Spread, EdgeCases) {
  EXPECT_FALSE(compute_spread(std::vector<double>{}));
  const auto zeros = compute_spread(std::vector<double>{0.0, 0.0});
  ASSERT_TRUE(zeros);
  EXPECT_EQ(zeros->jain, 1.0);
  EXPECT_EQ(zeros->cv, 0.0);
  EXPECT_FALSE(zeros->max_min_ratio);
  const auto one_idle = compute_spread(std::vector<double>{5.0, 0.0});
  ASSERT_TRUE(one_idle);
  EXPECT_DOUBLE_EQ(one_idle->jain, 0.5);
  EXPECT_FALSE(one_idle->max_min_ratio);
  EXPECT_THROW(compute_spread(std::vector<double>{1.0, -1.0}), Error);
  EXPECT_THROW(compute_spread(std::vector<double>{1.0, std::nan("")}), Error);
}

// ---- window_fairness

TEST(WindowFairness, StarvationInsideFairTotals) {
  // Two CPUs, four windows: perfectly fair totals (2 each), but each window
  // belongs to one CPU -- time slicing. Jain 0.5 in every window, every
  // window starved, none idle.
  const std::vector<std::vector<uint64_t>> per_cpu = {{2, 0, 0, 0, 9}, {0, 0, 2, 0, 9}};
  const auto f = window_fairness(per_cpu, 4);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->windows, 4u);
  EXPECT_EQ(f->starved_windows, 4u);
  EXPECT_EQ(f->idle_windows, 2u);  // windows 1 and 3: nobody progressed
  ASSERT_TRUE(f->jain_min && f->jain_median);
  EXPECT_DOUBLE_EQ(*f->jain_min, 0.5);
  EXPECT_DOUBLE_EQ(*f->jain_median, 0.5);
}

TEST(WindowFairness, MinAndMedianOverWindows) {
  const std::vector<std::vector<uint64_t>> per_cpu = {{5, 5, 1}, {5, 5, 3}};
  const auto f = window_fairness(per_cpu, 3);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->starved_windows, 0u);
  EXPECT_EQ(f->idle_windows, 0u);
  EXPECT_NEAR(*f->jain_min, 16.0 / 20.0, 1e-12);  // (1+3)^2 / (2 * (1+9))
  EXPECT_DOUBLE_EQ(*f->jain_median, 1.0);         // sorted {0.8, 1, 1}: rank 2
}

TEST(WindowFairness, NothingToAnalyse) {
  const std::vector<std::vector<uint64_t>> per_cpu = {{1}, {1}};
  EXPECT_FALSE(window_fairness(per_cpu, 0));
  EXPECT_FALSE(window_fairness(std::vector<std::vector<uint64_t>>{}, 1));
  EXPECT_THROW(window_fairness(per_cpu, 2), Error);
  const std::vector<std::vector<uint64_t>> idle = {{0, 0}, {0, 0}};
  const auto f = window_fairness(idle, 2);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->idle_windows, 2u);
  EXPECT_FALSE(f->jain_min);
}

// ---- thread usage

TEST(ThreadUsage, BusyLoopChargesCpuTimeAndDifferencesNeverWrap) {
  const ThreadUsage a = sample_thread_usage();
  volatile uint64_t sink = 0;
  while (sample_thread_usage().cpu_seconds - a.cpu_seconds < 0.02) sink = sink + 1;
  const ThreadUsage b = sample_thread_usage();
  const ThreadUsage d = usage_between(a, b);
  EXPECT_GE(d.cpu_seconds, 0.02);
  EXPECT_LT(d.cpu_seconds, 5.0);
  if (a.runqueue_wait_ns) {
    EXPECT_TRUE(d.runqueue_wait_ns);
  }
  const ThreadUsage back = usage_between(b, a);  // end before start: zeros, not 2^64 - x
  EXPECT_EQ(back.cpu_seconds, 0.0);
  EXPECT_EQ(back.involuntary_switches, 0u);
  EXPECT_EQ(back.voluntary_switches, 0u);
  if (back.runqueue_wait_ns) {
    EXPECT_EQ(*back.runqueue_wait_ns, 0u);
  }
}

}  // namespace
}  // namespace lockvisor::metrics
