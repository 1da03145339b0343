#include "vmm/trace/preemption_tracker.h"

namespace lockvisor::trace {

void PreemptionTracker::observe(const abi::VcpuRunState& record, TraceBuffer& lane) noexcept {
  if (!started_) {
    start(record);
    return;
  }
  // A record that went backwards (it cannot, unless the page was replaced)
  // restarts the baseline.
  if (record.preemptions < last_.preemptions || record.sleeps < last_.sleeps ||
      record.preempted_ns < last_.preempted_ns) {
    last_ = record;
    return;
  }
  const std::uint64_t preemptions = record.preemptions - last_.preemptions;
  if (preemptions == 0) {
    last_ = record;
    return;
  }
  const std::uint64_t sleeps = record.sleeps - last_.sleeps;
  const std::uint64_t length = record.preempted_ns - last_.preempted_ns;
  const std::uint64_t end = record.state_since_ns;
  if (sleeps != 0 || record.state != LOCKVISOR_RUNSTATE_RUNNING || length > end) {
    counts_.missed += preemptions;
  } else if (preemptions == 1) {
    lane.add({end - length, end, 0, 1, EventKind::kPreempted});
    ++counts_.exact;
  } else {
    lane.add({end - length, end, preemptions, 3, EventKind::kPreempted});
    counts_.merged += preemptions;
  }
  last_ = record;
}

}  // namespace lockvisor::trace
