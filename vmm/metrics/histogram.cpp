#include "vmm/metrics/histogram.h"

#include <bit>

namespace lockvisor::metrics {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

// Lowers `target` to `value` if smaller. The load-then-CAS shape means that
// once the minimum has settled, record() performs no write here at all.
void atomic_min(std::atomic<uint64_t>& target, uint64_t value) noexcept {
  uint64_t current = target.load(kRelaxed);
  while (value < current && !target.compare_exchange_weak(current, value, kRelaxed)) {
  }
}

void atomic_max(std::atomic<uint64_t>& target, uint64_t value) noexcept {
  uint64_t current = target.load(kRelaxed);
  while (value > current && !target.compare_exchange_weak(current, value, kRelaxed)) {
  }
}

}  // namespace

std::size_t Histogram::bucket_index(uint64_t value) noexcept {
  if (value < kSubBuckets) return static_cast<std::size_t>(value);
  // value in [2^e, 2^(e+1)), e >= kSubBucketBits. Shifting right by
  // e - kSubBucketBits leaves the leading 1 plus kSubBucketBits bits, i.e. a
  // number in [16, 32); its low bits select the linear sub-bucket. Group e
  // starts at index (e - kSubBucketBits + 1) * 16.
  const auto e = static_cast<unsigned>(std::bit_width(value)) - 1;
  const unsigned shift = e - kSubBucketBits;
  const auto sub = static_cast<std::size_t>(value >> shift) - kSubBuckets;
  return (e - kSubBucketBits + 1) * kSubBuckets + sub;
}

uint64_t Histogram::bucket_lowest(std::size_t index) noexcept {
  if (index < kSubBuckets) return index;
  const std::size_t group = index / kSubBuckets;  // >= 1; e = group + kSubBucketBits - 1
  const std::size_t sub = index % kSubBuckets;
  return static_cast<uint64_t>(kSubBuckets + sub) << (group - 1);
}

uint64_t Histogram::bucket_highest(std::size_t index) noexcept {
  if (index < kSubBuckets) return index;
  const std::size_t group = index / kSubBuckets;
  // lowest + width - 1: for the last bucket this is exactly UINT64_MAX,
  // whereas lowest + width would overflow.
  return bucket_lowest(index) + ((uint64_t{1} << (group - 1)) - 1);
}

uint64_t Histogram::bucket_count(std::size_t index) const noexcept {
  return index < kBucketCount ? buckets_[index].load(kRelaxed) : 0;
}

void Histogram::record(uint64_t value) noexcept {
  buckets_[bucket_index(value)].fetch_add(1, kRelaxed);
  sum_.fetch_add(value, kRelaxed);
  atomic_min(min_, value);
  atomic_max(max_, value);
}

void Histogram::merge(const Histogram& other) noexcept {
  for (std::size_t i = 0; i < kBucketCount; ++i) {
    if (const uint64_t n = other.buckets_[i].load(kRelaxed)) buckets_[i].fetch_add(n, kRelaxed);
  }
  sum_.fetch_add(other.sum_.load(kRelaxed), kRelaxed);
  const uint64_t other_min = other.min_.load(kRelaxed);
  const uint64_t other_max = other.max_.load(kRelaxed);
  if (other_min <= other_max) {  // other is not empty
    atomic_min(min_, other_min);
    atomic_max(max_, other_max);
  }
}

void Histogram::reset() noexcept {
  for (auto& b : buckets_) b.store(0, kRelaxed);
  sum_.store(0, kRelaxed);
  min_.store(UINT64_MAX, kRelaxed);
  max_.store(0, kRelaxed);
}

uint64_t Histogram::count() const noexcept {
  uint64_t total = 0;
  for (const auto& b : buckets_) total += b.load(kRelaxed);
  return total;
}

std::optional<uint64_t> Histogram::min() const noexcept {
  const uint64_t lo = min_.load(kRelaxed);
  if (lo > max_.load(kRelaxed)) return std::nullopt;
  return lo;
}

std::optional<uint64_t> Histogram::max() const noexcept {
  const uint64_t hi = max_.load(kRelaxed);
  if (min_.load(kRelaxed) > hi) return std::nullopt;
  return hi;
}

std::optional<double> Histogram::mean() const noexcept {
  const uint64_t n = count();
  if (n == 0) return std::nullopt;
  return static_cast<double>(sum_.load(kRelaxed)) / static_cast<double>(n);
}

std::optional<uint64_t> Histogram::percentile(double p) const {
  // Walk one snapshot of the counters so that the rank is computed against
  // the same total the walk sees, even while writers are recording.
  std::array<uint64_t, kBucketCount> snapshot{};
  uint64_t total = 0;
  for (std::size_t i = 0; i < kBucketCount; ++i) {
    snapshot[i] = buckets_[i].load(kRelaxed);
    total += snapshot[i];
  }
  const std::size_t rank = nearest_rank(total, p);  // validates p even when empty
  if (total == 0) return std::nullopt;

  std::size_t index = 0;
  for (uint64_t seen = 0; index < kBucketCount; ++index) {
    seen += snapshot[index];
    if (seen >= rank) break;
  }
  // Rank 1 is the minimum and rank `total` the maximum, both tracked
  // exactly. Any other sample lies in [min, max], so clamping the bucket
  // midpoint into that range can only move it closer to the true value. All
  // of this is skipped if a concurrent first record() has not yet published
  // min/max (min > max).
  const uint64_t lo = min_.load(kRelaxed);
  const uint64_t hi = max_.load(kRelaxed);
  const bool extremes_known = lo <= hi;
  if (extremes_known && rank == 1) return lo;
  if (extremes_known && rank == total) return hi;
  const uint64_t lowest = bucket_lowest(index);
  const uint64_t midpoint = lowest + (bucket_highest(index) - lowest) / 2;
  if (!extremes_known) return midpoint;
  return midpoint < lo ? lo : (midpoint > hi ? hi : midpoint);
}

LatencySummary Histogram::summary() const {
  LatencySummary s{};
  s.count = count();
  if (s.count == 0) return s;
  // Each percentile takes its own snapshot; after recording has stopped
  // (the intended use) they all agree.
  const auto pct = [this](double p) { return static_cast<double>(percentile(p).value_or(0)); };
  s.p50 = pct(50);
  s.p90 = pct(90);
  s.p99 = pct(99);
  s.p999 = pct(99.9);
  s.max = static_cast<double>(max().value_or(0));
  s.mean = mean().value_or(0);
  return s;
}

}  // namespace lockvisor::metrics
