#include "vmm/trace/runstate_sampler.h"

#include "vmm/machine/vcpu_runner.h"
#include "vmm/runstate/runstate_page.h"

namespace lockvisor::trace {
namespace {
constexpr std::uint32_t kPreempted = LOCKVISOR_RUNSTATE_PREEMPTED;
}

void RunStateSampler::start(machine::RunContext& context) {
  page_ = context.control.runstate_page();
  auto& meta = trace_.metadata()["host_preemptions"];
  if (page_ == nullptr) {
    meta["source"] = "none";
    meta["why"] =
        "the vCPU run-state page is not live (see the run report's runstate_detail); host preemptions are not on "
        "the timeline: the run report's per-vCPU runqueue_wait_ns and involuntary_switches give their totals";
    return;
  }
  meta["source"] = "run-state page (sched_switch BPF), sampled";
  meta["period_us"] = trace_.options().sample_period.count();
  const unsigned n = std::min<unsigned>(trace_.vcpus(), abi::kRunStateMaxVcpus);
  seen_.resize(n);
  first_.resize(n);
  const std::uint64_t now = now_ns();
  for (unsigned i = 0; i < n; ++i) {
    seen_[i].record = first_[i] = runstate::read_record(page_->records()[i]);
    seen_[i].read_ns = now;
  }
  timer_ = std::make_unique<boost::asio::steady_timer>(context.io);
  arm();
}

void RunStateSampler::arm() {
  timer_->expires_after(trace_.options().sample_period);
  timer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    sample(now_ns());
    arm();
  });
}

void RunStateSampler::sample(std::uint64_t now) {
  ++samples_;
  for (unsigned i = 0; i < seen_.size(); ++i) {
    Seen& s = seen_[i];
    const abi::VcpuRunState r = runstate::read_record(page_->records()[i]);
    if (r.seq == s.record.seq) {
      s.read_ns = now;
      continue;
    }
    if (s.record.state == kPreempted) {
      // One change since the last read: it ended this preemption, at r's stamp.
      const bool exact = r.seq - s.record.seq == 2;
      const std::uint64_t end = exact ? r.state_since_ns : s.read_ns;
      if (end >= s.record.state_since_ns) {
        trace_.host_lane(i).add({s.record.state_since_ns, end, 0, exact ? 1u : 0u, EventKind::kPreempted});
        ++s.slices;
        if (!exact) ++s.inexact;
      }
    }
    s.record = r;
    s.read_ns = now;
  }
}

void RunStateSampler::stop() {
  if (!timer_) return;
  timer_->cancel();
  sample(now_ns());
  auto& meta = trace_.metadata()["host_preemptions"];
  std::uint64_t counted = 0, slices = 0, inexact = 0;
  for (unsigned i = 0; i < seen_.size(); ++i) {
    counted += seen_[i].record.preemptions - first_[i].preemptions;
    slices += seen_[i].slices;
    inexact += seen_[i].inexact;
  }
  meta["samples"] = samples_;
  meta["preemptions_counted"] = counted;  // by the page over the sampled time
  meta["slices"] = slices;
  meta["slices_inexact_end"] = inexact;
  meta["missed"] = counted > slices ? counted - slices : 0;
  timer_.reset();
}

}  // namespace lockvisor::trace
