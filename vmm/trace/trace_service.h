// --trace as a run service (docs/trace.md): before the VM's first
// instruction it allocates the trace's lanes, gives lock workloads of the
// freestanding guest a lock-trace log in guest memory, watches every vCPU
// (VcpuTraceObserver), the backend's kicks and the host's preemptions
// (RunStateSampler); after the run it measures the guest clock's relation to
// the trace clock again and turns the guest's lock log into slices.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vmm/machine/run_service.h"
#include "vmm/trace/lock_log.h"
#include "vmm/trace/runstate_sampler.h"
#include "vmm/trace/trace.h"
#include "vmm/trace/trace_clock.h"
#include "vmm/trace/vcpu_trace_observer.h"

namespace lockvisor::trace {

// For a trace whose lanes filled (metadata "sizing", written by the run's
// TraceService): one line saying what that costs and the --trace-max-events
// and --memory that would have kept the run whole; empty when none filled.
std::string sizing_advice(const nlohmann::json& metadata);

class TraceService final : public machine::RunService {
 public:
  // `trace` must outlive the run.
  explicit TraceService(Trace& trace) : trace_(trace) {}

  void before_boot(machine::BootContext& boot) override;
  void start(machine::RunContext& context) override { sampler_->start(context); }
  void stop() override {
    sampler_->stop();
    finish();
  }

 private:
  void finish();

  Trace& trace_;
  const machine::BootContext* boot_ = nullptr;
  LockLogPlacement lock_log_;
  std::uint64_t free_bytes_ = 0;  // the guest's free memory before the lock log took its part
  ClockPair clock_start_;
  std::optional<TscOffset> offset_start_;
  std::vector<std::optional<std::int64_t>> offsets_attr_;  // each vCPU's, before the run
  std::vector<std::unique_ptr<VcpuTraceObserver>> observers_;
  std::optional<RunStateSampler> sampler_;
};

}  // namespace lockvisor::trace
