// Sums of guest-reported counts: every count in a WorkloadStats record is the
// guest's word, so sums saturate at 2^64 - 1 instead of wrapping, and no
// total can come out smaller than one of its parts (two vCPUs reporting
// 2^63 violations each must not add up to 0).
#pragma once
#include <cstdint>
#include <optional>

namespace lockvisor::lockstat {

inline std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}
inline void add_to(std::uint64_t& total, std::uint64_t value) { total = saturating_add(total, value); }
inline void add_to(std::optional<std::uint64_t>& total, std::uint64_t value) {
  total = saturating_add(total.value_or(0), value);
}

}  // namespace lockvisor::lockstat
