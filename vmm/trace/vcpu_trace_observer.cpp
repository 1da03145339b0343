#include "vmm/trace/vcpu_trace_observer.h"

#include <chrono>

#include "vmm/runstate/runstate_page.h"

namespace lockvisor::trace {

void VcpuTraceObserver::read_record() {
  if (preemptions_ != nullptr) preemptions_->observe(runstate::read_record(*record_), *host_lane_);
}

void VcpuTraceObserver::guest_ran(std::uint64_t entered, std::uint64_t left) {
  lane_.add({entered, left, 0, 0, EventKind::kGuest});
  read_record();
}

void VcpuTraceObserver::exit_handled(devices::ExitKind kind, std::uint64_t left, std::uint64_t done) {
  lane_.add({left, done, 0, static_cast<std::uint32_t>(kind), EventKind::kExit});
}

void VcpuTraceObserver::halted(std::uint64_t begin, std::uint64_t end) {
  lane_.add({begin, end, 0, 0, EventKind::kHalt});
  read_record();
}

void VcpuTraceObserver::parked(const machine::ParkInterval& interval) {
  // steady_clock is CLOCK_MONOTONIC, the trace's clock.
  const auto ns = [](machine::VcpuPark::Clock::time_point t) {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
  };
  lane_.add({ns(interval.begin), ns(interval.end), 0, static_cast<std::uint32_t>(interval.cause), EventKind::kParked});
}

}  // namespace lockvisor::trace
