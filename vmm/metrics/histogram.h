// A fixed-size log-linear latency histogram (an HdrHistogram-lite) that many
// threads can record into without locks; used for the VMM's kick->wake
// latency, recorded by the vCPU threads.
//
// Bucketing: values 0..15 each get an exact bucket. A larger value v with
// highest set bit e (2^e <= v < 2^(e+1), e >= 4) falls into one of 16 equal
// linear sub-buckets of [2^e, 2^(e+1)), each 2^(e-4) wide. That covers the
// whole uint64_t range in 16 + 60 * 16 = 976 buckets (7.6 KiB) with no
// overflow bucket.
//
// Error bound: a bucket of width w starts at or above 16 * w, and a
// percentile reports the bucket's midpoint (clamped to the recorded
// [min, max]), so it differs from the true sample value at that rank by at
// most w / 2 <= value / 32: relative error <= kMaxRelativeError = 1/32
// (3.125%). Values below 16 are exact, and so are the first and last ranks
// (p0 is the exact min, p100 the exact max). min, max, count and mean are
// exact.
//
// Concurrency: record() is wait-free except for the min/max updates (a CAS
// loop that only runs while the extreme is actually changing), using relaxed
// atomics: counters need atomicity, not ordering. Readers that run while
// writers record see each counter at some recent value, not one consistent
// snapshot; read after the writers have been joined for exact results.
#pragma once
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "vmm/metrics/summary.h"

namespace lockvisor::metrics {

class Histogram {
 public:
  static constexpr unsigned kSubBucketBits = 4;
  static constexpr std::size_t kSubBuckets = std::size_t{1} << kSubBucketBits;  // 16
  static constexpr std::size_t kBucketCount = kSubBuckets + (64 - kSubBucketBits) * kSubBuckets;  // 976
  static constexpr double kMaxRelativeError = 1.0 / (2 * kSubBuckets);                          // 1/32

  Histogram() noexcept = default;
  // Atomics are neither copyable nor movable; use merge() to combine.
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // Records one value (e.g. nanoseconds). Safe to call concurrently.
  void record(uint64_t value) noexcept;
  // Adds every sample of `other` to this histogram. Safe to call while
  // either side is being recorded into (with the caveat above).
  void merge(const Histogram& other) noexcept;
  // Forgets every sample. Not meant to race with record().
  void reset() noexcept;

  uint64_t count() const noexcept;
  std::optional<uint64_t> min() const noexcept;  // exact; nullopt when empty
  std::optional<uint64_t> max() const noexcept;  // exact; nullopt when empty
  // Exact mean; the running sum wraps after 2^64 (584 years of nanoseconds).
  std::optional<double> mean() const noexcept;
  // Nearest-rank percentile (same definition as metrics::percentile), as the
  // representative value of the bucket holding that rank; within
  // kMaxRelativeError of the exact value. nullopt when empty. Throws
  // lockvisor::Error if p is not in [0, 100].
  std::optional<uint64_t> percentile(double p) const;
  // count, p50/p90/p99/p99.9 (approximate, as percentile()), exact max and
  // mean; all zero when empty, like summarize_latency().
  LatencySummary summary() const;

  // Bucket geometry, public for tests and for exporting the raw histogram.
  static std::size_t bucket_index(uint64_t value) noexcept;
  static uint64_t bucket_lowest(std::size_t index) noexcept;   // smallest value in the bucket
  static uint64_t bucket_highest(std::size_t index) noexcept;  // largest value in the bucket
  uint64_t bucket_count(std::size_t index) const noexcept;

 private:
  std::array<std::atomic<uint64_t>, kBucketCount> buckets_{};
  std::atomic<uint64_t> sum_{0};
  // min_ > max_ (the initial state) means "no samples yet".
  std::atomic<uint64_t> min_{UINT64_MAX};
  std::atomic<uint64_t> max_{0};
};

}  // namespace lockvisor::metrics
