// The timeline's one clock and how guest TSC values join it.
//
// Host events are stamped with CLOCK_MONOTONIC on the thread where they
// happen (vDSO, ~20 ns, no system call on a TSC clocksource), which is also
// the clock of the run-state page (bpf_ktime_get_ns) and of the park
// intervals (steady_clock). Guest events carry guest TSC values: KVM gives a
// guest TSC = host TSC * ratio + offset (the vCPU's TSC offset); lockvisor
// never sets a ratio, so guest = host + offset. The offset is measured by
// reading the guest's IA32_TSC (KVM_GET_MSRS) between two host rdtsc, before
// the run and after it; host TSC maps to CLOCK_MONOTONIC by two
// (rdtsc, clock_gettime) pairs, one at each end of the run.
#pragma once
#include <cstdint>
#include <optional>

namespace lockvisor::trace {

// CLOCK_MONOTONIC in nanoseconds.
std::uint64_t now_ns() noexcept;

// A host TSC value and the CLOCK_MONOTONIC time read between two rdtsc
// (the narrowest of several tries): `tsc` is their midpoint.
struct ClockPair {
  std::uint64_t tsc = 0;
  std::uint64_t ns = 0;
  std::uint64_t bracket_cycles = 0;  // width of the rdtsc pair around the clock read
};
ClockPair sample_clock_pair();

// guest TSC = host TSC + offset, as measured around one KVM_GET_MSRS.
struct TscOffset {
  std::int64_t offset = 0;
  std::uint64_t bracket_cycles = 0;  // the host rdtsc pair around the ioctl: the offset's uncertainty is half of it
};
// Reads IA32_TSC of the vCPU `vcpu_fd` (it must not be in KVM_RUN) between
// two host rdtsc, several times, and keeps the narrowest bracket. nullopt
// when KVM refuses the read.
std::optional<TscOffset> measure_tsc_offset(int vcpu_fd);
// The vCPU's TSC offset as KVM keeps it (KVM_GET_DEVICE_ATTR,
// KVM_VCPU_TSC_CTRL / KVM_VCPU_TSC_OFFSET, Linux 5.16+): exact, no bracket.
// nullopt when this KVM does not have the attribute.
std::optional<std::int64_t> read_tsc_offset_attr(int vcpu_fd);

// Guest TSC -> CLOCK_MONOTONIC ns. Pure arithmetic (unit-tested).
class GuestClock {
 public:
  GuestClock() = default;
  // `start`/`end`: host clock pairs from both ends of the run (end.tsc >
  // start.tsc; otherwise `tsc_khz` gives the rate), `offset` the guest's.
  GuestClock(ClockPair start, ClockPair end, std::int64_t offset, std::uint64_t tsc_khz);
  // Nanoseconds; guest values before the start pair map before start.ns.
  std::int64_t to_ns(std::uint64_t guest_tsc) const;
  double ns_per_cycle() const { return ns_per_cycle_; }

 private:
  ClockPair start_;
  std::int64_t offset_ = 0;
  double ns_per_cycle_ = 1.0;
};

}  // namespace lockvisor::trace
