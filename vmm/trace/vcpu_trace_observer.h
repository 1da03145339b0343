// The timeline's watcher of one vCPU (machine::VcpuObserver): guest and exit
// slices, VMM-side halts and parks into the vCPU's lane; with a live
// run-state page (and no preemption history ring), the host lane from the
// vCPU's run-state record, read after every KVM_RUN and on both sides of a
// halt, so that a sleep in a blocked halt is never taken for the end of a
// preemption. Runs on the vCPU's thread only.
#pragma once
#include "lockvisor/abi/vcpu_runstate.h"
#include "vmm/machine/vcpu_observer.h"
#include "vmm/trace/preemption_tracker.h"
#include "vmm/trace/trace_buffer.h"

namespace lockvisor::trace {

class VcpuTraceObserver final : public machine::VcpuObserver {
 public:
  // `host_lane`, `preemptions` and `record` are all null or all set.
  VcpuTraceObserver(TraceBuffer& lane, TraceBuffer* host_lane, PreemptionTracker* preemptions,
                    const abi::VcpuRunState* record)
      : lane_(lane), host_lane_(host_lane), preemptions_(preemptions), record_(record) {}

  void guest_ran(std::uint64_t entered, std::uint64_t left) override;
  void exit_handled(devices::ExitKind kind, std::uint64_t left, std::uint64_t done) override;
  void halt_begins() override { read_record(); }
  void halted(std::uint64_t begin, std::uint64_t end) override;
  void parked(const machine::ParkInterval& interval) override;

 private:
  void read_record();

  TraceBuffer& lane_;
  TraceBuffer* host_lane_;
  PreemptionTracker* preemptions_;
  const abi::VcpuRunState* record_;
};

}  // namespace lockvisor::trace
