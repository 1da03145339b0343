// CLOCK_MONOTONIC in nanoseconds: the one clock of timelines and run times
// (std::chrono::steady_clock is the same clock with libstdc++ on Linux).
#pragma once
#include <time.h>

#include <cstdint>

namespace lockvisor {

inline std::uint64_t monotonic_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace lockvisor
