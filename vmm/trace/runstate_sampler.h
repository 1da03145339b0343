// The host lane of the timeline: when each vCPU thread was descheduled by
// the host scheduler.
//
// With a live vCPU run-state page (docs/runstate.md) and its preemption
// history ring, this service drains each vCPU's ring every kHistoryPeriod
// and at the end (PreemptionHistoryReader): every preemption with its exact
// switch-out and switch-in times, also inside one long KVM_RUN (a spinning
// vCPU may not exit for many host slices).
//
// With the page but no history (it could not be mapped), the vCPU threads
// draw the lane themselves (PreemptionTracker: exact when one preemption
// falls between two of their reads, merged otherwise); this service then only
// reports, at the end, how many preemptions the page counted and how many
// were drawn exactly, merged or not at all.
//
// Without a live page it samples what can be sampled honestly: each vCPU
// thread's schedstat run_delay (time spent runnable but waiting for a CPU),
// read every kFallbackPeriod on the monitor thread. A growth of d ns between
// two reads is drawn as one slice of length d ending at the second read,
// marked "schedstat": its total is right, its position within the period is
// not known.
#pragma once
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <optional>
#include <vector>

#include "lockvisor/abi/vcpu_runstate.h"
#include "vmm/machine/run_service.h"
#include "vmm/trace/preemption_history.h"
#include "vmm/trace/trace.h"
#include "vmm/util/unique_fd.h"

namespace lockvisor::runstate {
class RunStatePage;
}

namespace lockvisor::trace {

class RunStateSampler final : public machine::RunService {
 public:
  explicit RunStateSampler(Trace& trace) : trace_(trace) {}
  void start(machine::RunContext& context) override;
  void stop() override;

 private:
  void arm();
  void sample_schedstat(std::uint64_t now);
  void drain_history();

  Trace& trace_;
  const runstate::RunStatePage* page_ = nullptr;
  std::unique_ptr<boost::asio::steady_timer> timer_;
  std::vector<abi::VcpuRunState> first_;  // each record when the run started
  std::vector<PreemptionHistoryReader> history_;  // empty: no history ring
  std::uint64_t samples_ = 0;
  // The schedstat fallback: each vCPU thread's /proc schedstat, opened once
  // the thread exists, and the run_delay of the last read.
  struct Schedstat {
    UniqueFd fd;
    std::uint64_t run_delay_ns = 0;
    std::uint64_t read_ns = 0;
    bool opened = false;
  };
  std::span<const std::unique_ptr<machine::VcpuRunner>> vcpus_;
  std::vector<Schedstat> schedstat_;
  std::uint64_t schedstat_ns_ = 0;
};

}  // namespace lockvisor::trace
