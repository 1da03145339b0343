// The host lane of the timeline: when each vCPU thread was preempted by the
// host scheduler, sampled from the vCPU run-state page (docs/runstate.md).
//
// The page's BPF program stamps every switch of a vCPU thread with its
// CLOCK_MONOTONIC time and bumps the record's seq by 2. Every period the
// sampler (a RunService on the monitor thread) reads each record: when one
// change happened since the last read and the previous state was
// "preempted", both ends of that preemption are exact. When several changes
// happened in between, the preemption's start is exact and its end is only
// known to be after the previous read: the slice ends there, marked inexact
// (a lower bound). Preemptions that began and ended between two reads are
// not seen; the metadata gives their number (the record's count minus the
// slices). Without a live page nothing is sampled and the metadata says why.
#pragma once
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <optional>
#include <vector>

#include "lockvisor/abi/vcpu_runstate.h"
#include "vmm/machine/run_service.h"
#include "vmm/trace/trace.h"

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
  void sample(std::uint64_t now);

  struct Seen {
    abi::VcpuRunState record{};  // the last read
    std::uint64_t read_ns = 0;   // when it was read
    std::uint64_t slices = 0;    // preemptions put on the lane
    std::uint64_t inexact = 0;
  };
  Trace& trace_;
  const runstate::RunStatePage* page_ = nullptr;
  std::unique_ptr<boost::asio::steady_timer> timer_;
  std::vector<Seen> seen_;
  std::vector<abi::VcpuRunState> first_;
  std::uint64_t samples_ = 0;
};

}  // namespace lockvisor::trace
