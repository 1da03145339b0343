// Host preemptions of one vCPU thread, read by the thread itself from its
// run-state record (docs/runstate.md) at points it passes anyway: after each
// KVM_RUN, before and after each halt. No exit, no system call: one seqlock
// read of a 64-byte record the host's sched_switch BPF program writes.
//
// Between two reads the record says how many times the thread was preempted
// (preemptions), slept (sleeps), and how long its finished preemptions took
// (preempted_ns); state_since_ns is the time of its last switch, which for a
// thread that is running now is the end of its last time off the CPU. So:
//   - one preemption and no sleep since the last read: that preemption was
//     exactly [since - its length, since] (a slice marked exact);
//   - several preemptions and no sleep: they all lie between the last read
//     and `since`, lasting preempted_ns together: one slice of that total
//     ending at `since`, marked merged (its start is not a real switch);
//   - preemptions mixed with sleeps: `since` may be a sleep's end, so they
//     are not drawn, only counted (missed).
#pragma once
#include <cstdint>

#include "lockvisor/abi/vcpu_runstate.h"
#include "vmm/trace/trace_buffer.h"

namespace lockvisor::trace {

struct PreemptionCounts {
  std::uint64_t exact = 0;   // preemptions drawn with both ends exact
  std::uint64_t merged = 0;  // preemptions drawn inside a merged slice
  std::uint64_t missed = 0;  // counted by the page, not drawn
};

class PreemptionTracker {
 public:
  // The first read: the baseline (nothing drawn).
  void start(const abi::VcpuRunState& record) {
    last_ = record;
    started_ = true;
  }
  // Compares `record` (a consistent read of this vCPU's record) with the
  // last one and draws what it can on `lane`.
  void observe(const abi::VcpuRunState& record, TraceBuffer& lane) noexcept;
  const PreemptionCounts& counts() const { return counts_; }

 private:
  abi::VcpuRunState last_{};
  bool started_ = false;
  PreemptionCounts counts_;
};

}  // namespace lockvisor::trace
