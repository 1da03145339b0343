// The preemption injector (docs/preemption.md): a RunService that carries
// out every --inject schedule of a run.
//
//   periodic/random  asio timers on the monitor thread, one per (schedule,
//                    vCPU), call VcpuRunner::inject_preemption (no thread of
//                    their own);
//   holder/waiter    the guest takes the seeded choice itself and stops at the
//                    chosen event with a kPreemptPoint ucall; the injector
//                    checks that ucall against the schedule and the vCPU's
//                    probe record and parks the vCPU there (VcpuPark).
//
// Counts: per vCPU and per kind, into VcpuReport::injected. Timed counts are
// written on the monitor thread, targeted ones on their vCPU's thread, and
// both are read only after every vCPU thread has been joined.
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lockvisor/abi/lock_probe.h"
#include "vmm/inject/inject_spec.h"
#include "vmm/machine/run_service.h"
#include "vmm/machine/vcpu_runner.h"

namespace lockvisor::inject {

class Injector : public machine::RunService {
 public:
  // `specs` already validated (validate_inject_specs); `run_seed`: --seed.
  Injector(std::vector<InjectSpec> specs, std::uint64_t run_seed, unsigned vcpus);
  ~Injector() override;

  void start(machine::RunContext& context) override;
  void stop() override;
  void report(machine::RunResult& result) override;

  // The check of one preemption point (public for unit tests): the verdict
  // VcpuRunner::on_preempt_point returns. Counts the point when accepted.
  machine::VcpuRunner::PreemptVerdict preemption_point(unsigned vcpu, std::span<const std::byte> memory,
                                                      const std::uint64_t (&args)[3]);

  static constexpr std::size_t kMaxRecordedEvents = 1024;

 private:
  struct Timed;
  struct KindCounts {
    std::uint64_t count = 0;
    std::uint64_t ns = 0;
    std::vector<std::uint64_t> events;
    std::optional<std::uint64_t> last_index;
  };
  struct VcpuCounts {
    std::array<KindCounts, kInjectKinds> kinds;
  };

  void arm(Timed& t);

  std::vector<InjectSpec> specs_;
  std::uint64_t run_seed_;
  std::optional<abi::LockProbeConfig> probe_;
  std::vector<VcpuCounts> counts_;
  std::vector<std::unique_ptr<Timed>> timed_;
  bool has_kind_[kInjectKinds] = {};
};

}  // namespace lockvisor::inject
