// The PV backend's per-vCPU counters: one list, like guest/locks/lock_events.h.
//
// LOCKVISOR_PV_COUNTERS(X) names every counter once, X(field, "what it
// counts"); the field name is also its JSON key in the run report ("pv").
// It generates
//   * VcpuPvCounters (pv_backend.h): relaxed atomics the backend bumps;
//   * PvCounts: a plain copy taken at the end of a run, the typed value that
//     travels in machine::VcpuReport and is turned into JSON only at the output;
//   * kPvCounterNames / pv_counter_fields: for reporters that iterate.
// Code reads a counter as a member (`report.pv.halts`), so a renamed or removed
// counter is a compile error, never a silent 0 from a string-keyed map.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

namespace lockvisor::pvlock {

// clang-format off
#define LOCKVISOR_PV_COUNTERS(X)                                                                   \
  X(halts,               "halt requests (hlt or HALT hypercall)")                                  \
  X(halts_immediate,     "halts that returned at once: a kick was pending")                        \
  X(halts_polled,        "halts whose kick arrived while polling (halt polling succeeded)")       \
  X(halts_woken,         "halts that slept and were woken by a kick")                              \
  X(halts_expired,       "halts with a time limit (HALT_FOR) that reached it with no kick")        \
  X(halt_polls_failed,   "halts that polled the whole window, then slept")                         \
  X(halt_poll_ns,        "host CPU time spent polling in halts, ns (succeeded and failed polls)")  \
  X(kicks_sent,          "KICK_CPU calls made by this vCPU")                                       \
  X(kicks_invalid,       "... naming a target that does not exist")                                \
  X(kicks_received,      "kicks that set this vCPU's latch")                                       \
  X(kicks_coalesced,     "kicks that found a kick already pending here")                           \
  X(kicks_dropped,       "kicks lost here (lossy mode, not halted)")                               \
  X(kick_delays_cut,     "--kick-delay-us waits of this vCPU's kicks cut short by the run's end")  \
  X(kick_yields,         "kicks after which this vCPU (the kicker) yielded its host CPU")          \
  X(yield_to_calls,      "YIELD_TO hypercalls made by this vCPU")                                  \
  X(boosts,              "times this vCPU was boosted (YIELD_TO target or --kick-boost)")          \
  X(boosts_expired,      "boosts of this vCPU ended by the time bound rather than a release")
// clang-format on

enum class PvCounter : unsigned {
#define LOCKVISOR_X_ENUM_(name, desc) name,
  LOCKVISOR_PV_COUNTERS(LOCKVISOR_X_ENUM_)
#undef LOCKVISOR_X_ENUM_
      count_
};
inline constexpr std::size_t kPvCounterCount = static_cast<std::size_t>(PvCounter::count_);

inline constexpr std::array<const char*, kPvCounterCount> kPvCounterNames{
#define LOCKVISOR_X_NAME_(name, desc) #name,
    LOCKVISOR_PV_COUNTERS(LOCKVISOR_X_NAME_)
#undef LOCKVISOR_X_NAME_
};

inline constexpr std::array<const char*, kPvCounterCount> kPvCounterDescriptions{
#define LOCKVISOR_X_DESC_(name, desc) desc,
    LOCKVISOR_PV_COUNTERS(LOCKVISOR_X_DESC_)
#undef LOCKVISOR_X_DESC_
};

// One vCPU's counters at the end of a run.
struct PvCounts {
#define LOCKVISOR_X_FIELD_(name, desc) std::uint64_t name = 0;
  LOCKVISOR_PV_COUNTERS(LOCKVISOR_X_FIELD_)
#undef LOCKVISOR_X_FIELD_

  // The counters in list order (for reporters that iterate).
  std::array<std::uint64_t, kPvCounterCount> values() const {
    return {
#define LOCKVISOR_X_VALUE_(name, desc) name,
        LOCKVISOR_PV_COUNTERS(LOCKVISOR_X_VALUE_)
#undef LOCKVISOR_X_VALUE_
    };
  }
  PvCounts& operator+=(const PvCounts& other) {
#define LOCKVISOR_X_ADD_(name, desc) name += other.name;
    LOCKVISOR_PV_COUNTERS(LOCKVISOR_X_ADD_)
#undef LOCKVISOR_X_ADD_
    return *this;
  }
};

// A counter's name, for messages that name a member (`&PvCounts::halts`).
inline const char* pv_counter_name(std::uint64_t PvCounts::*member) {
  static constexpr std::uint64_t PvCounts::*kMembers[] = {
#define LOCKVISOR_X_MEMBER_(name, desc) &PvCounts::name,
      LOCKVISOR_PV_COUNTERS(LOCKVISOR_X_MEMBER_)
#undef LOCKVISOR_X_MEMBER_
  };
  for (std::size_t i = 0; i < kPvCounterCount; ++i)
    if (kMembers[i] == member) return kPvCounterNames[i];
  return "?";
}

}  // namespace lockvisor::pvlock
