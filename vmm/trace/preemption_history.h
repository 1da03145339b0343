// Host preemptions of one vCPU thread from the run-state program's history
// ring (vmm/runstate/runstate_bpf_shared.h): every finished preemption as
// the host scheduler saw it, [switch-out, switch-in], written by the BPF
// program at the switch-in. Unlike PreemptionTracker (which reads the
// counters when the vCPU thread passes by and must merge several
// preemptions inside one long KVM_RUN), every interval is exact, wherever it
// fell; the monitor thread drains the ring often enough that it never laps
// (256 slots, against a few preemptions per host time slice).
//
// The ring is written by the kernel while it is read: a slot the writer may
// have reused during the read (its index is a full ring behind the count
// read afterwards) is not drawn but counted as lost, like slots the writer
// lapped before the read.
#pragma once
#include <cstdint>

#include "vmm/runstate/runstate_bpf_shared.h"
#include "vmm/trace/trace_buffer.h"

namespace lockvisor::trace {

class PreemptionHistoryReader {
 public:
  // The baseline: preemptions already in the ring are not drawn.
  void start(const lockvisor_preemption_history& ring) noexcept;
  // Draws the preemptions written since the last call on `lane` (exact).
  void drain(const lockvisor_preemption_history& ring, TraceBuffer& lane) noexcept;
  std::uint64_t drawn() const { return drawn_; }
  std::uint64_t lost() const { return lost_; }

 private:
  std::uint64_t next_ = 0;  // the count up to which the ring has been read
  std::uint64_t drawn_ = 0;
  std::uint64_t lost_ = 0;
};

}  // namespace lockvisor::trace
