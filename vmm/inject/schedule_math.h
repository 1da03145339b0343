// The arithmetic of the timed schedules (periodic, random), apart from
// timers so unit tests can check it.
#pragma once
#include <chrono>
#include <cmath>
#include <cstdint>

#include "lockvisor/abi/lock_probe.h"
#include "vmm/inject/inject_spec.h"

namespace lockvisor::inject {

// Periodic: injection k (0-based) is due `phase + k * interval` after the
// schedule starts.
constexpr std::chrono::nanoseconds periodic_due(std::chrono::nanoseconds phase, std::chrono::nanoseconds interval,
                                                std::uint64_t k) {
  return phase + interval * static_cast<std::int64_t>(k);
}

// How many injections are due in [0, span] (the expected count of a run
// that lasted `span`).
constexpr std::uint64_t periodic_due_within(std::chrono::nanoseconds phase, std::chrono::nanoseconds interval,
                                            std::chrono::nanoseconds span) {
  if (span < phase || interval.count() <= 0) return 0;
  return static_cast<std::uint64_t>((span - phase) / interval) + 1;
}

// A seeded stream of uniform draws (SplitMix64), one per (seed, vCPU): the
// random schedule's arrivals on a vCPU depend on nothing else.
class SeededStream {
 public:
  constexpr SeededStream(std::uint64_t seed, unsigned vcpu) : state_(abi::probe_mix(seed ^ (0x5eedull << 32) ^ vcpu)) {}
  constexpr std::uint64_t next() {
    state_ += 0x9E37'79B9'7F4A'7C15ull;
    return abi::probe_mix(state_);
  }
  // Uniform in [0, 1), 53 bits.
  constexpr double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t state_;
};

// Poisson arrivals at `rate_hz`: the exponential gap to the next one for a
// uniform draw u in [0, 1).
inline std::chrono::nanoseconds poisson_gap(double u, double rate_hz) {
  const double seconds = -std::log1p(-u) / rate_hz;
  return std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9));
}

// A timed schedule (periodic or random) on one vCPU or thread, after
// `fired` injections: the gap to the next one (periodic: phase first, then
// every; random: the stream's next Poisson gap), and whether its count=
// is used up. Shared by the VMM's injector and the native one, so one seed
// gives one schedule in both.
inline std::chrono::nanoseconds next_timed_gap(const InjectSpec& spec, std::uint64_t fired, SeededStream& stream) {
  if (spec.kind == InjectKind::kPeriodic) return fired == 0 ? spec.phase : spec.interval;
  return poisson_gap(stream.uniform(), spec.rate_hz);
}
constexpr bool timed_done(const InjectSpec& spec, std::uint64_t fired) { return spec.count && fired >= *spec.count; }

}  // namespace lockvisor::inject
