#include "vmm/trace/runstate_sampler.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "vmm/machine/vcpu_runner.h"
#include "vmm/runstate/runstate_page.h"

namespace lockvisor::trace {
namespace {
// /proc reads cost far more than a page read: sample the fallback less often.
constexpr std::chrono::microseconds kFallbackPeriod{1000};
// The history ring holds 256 preemptions per vCPU; a vCPU thread is
// preempted at most once per host time slice (~1-4 ms), so 10 ms never laps.
constexpr std::chrono::milliseconds kHistoryPeriod{10};

// Field 2 of /proc/<pid>/task/<tid>/schedstat: run_delay, ns.
std::optional<std::uint64_t> read_run_delay(int fd) {
  char text[128];
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  if (n <= 0) return std::nullopt;
  text[n] = '\0';
  unsigned long long running = 0, delay = 0;
  if (std::sscanf(text, "%llu %llu", &running, &delay) != 2) return std::nullopt;
  return delay;
}
}  // namespace

void RunStateSampler::start(machine::RunContext& context) {
  page_ = context.control.runstate_page();
  auto& meta = trace_.metadata()["host_preemptions"];
  vcpus_ = context.vcpus;
  if (page_ == nullptr) {
    meta["source"] = "schedstat";
    meta["why"] =
        "the vCPU run-state page is not live (see the run report's runstate_detail): each vCPU thread's schedstat "
        "run_delay is sampled instead; a slice's length is the run-queue wait within one period, its position in "
        "the period unknown";
    meta["period_us"] = kFallbackPeriod.count();
    schedstat_.resize(trace_.vcpus());
    timer_ = std::make_unique<boost::asio::steady_timer>(context.io);
    arm();
    return;
  }
  first_.resize(std::min<unsigned>(trace_.vcpus(), abi::kRunStateMaxVcpus));
  for (unsigned i = 0; i < first_.size(); ++i) first_[i] = runstate::read_record(page_->records()[i]);
  if (page_->history(0) == nullptr) {
    meta["source"] = "run-state page (sched_switch BPF), read by each vCPU thread after every KVM_RUN and around halts";
    return;
  }
  meta["source"] = "run-state program's preemption history (sched_switch BPF: switch-out and switch-in times)";
  meta["period_us"] = std::chrono::duration_cast<std::chrono::microseconds>(kHistoryPeriod).count();
  history_.resize(first_.size());
  for (unsigned i = 0; i < history_.size(); ++i) history_[i].start(*page_->history(i));
  timer_ = std::make_unique<boost::asio::steady_timer>(context.io);
  arm();
}

void RunStateSampler::drain_history() {
  ++samples_;
  for (unsigned i = 0; i < history_.size(); ++i) history_[i].drain(*page_->history(i), trace_.host_lane(i));
}

void RunStateSampler::arm() {
  timer_->expires_after(history_.empty() ? std::chrono::nanoseconds(kFallbackPeriod) : kHistoryPeriod);
  timer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    if (history_.empty()) {
      sample_schedstat(now_ns());
    } else {
      drain_history();
    }
    arm();
  });
}

void RunStateSampler::sample_schedstat(std::uint64_t now) {
  ++samples_;
  for (unsigned i = 0; i < schedstat_.size() && i < vcpus_.size(); ++i) {
    Schedstat& s = schedstat_[i];
    if (!s.opened) {
      const pid_t tid = vcpus_[i]->thread_id();
      if (tid == 0) continue;
      s.opened = true;
      const std::string path = "/proc/self/task/" + std::to_string(tid) + "/schedstat";
      s.fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      if (const auto delay = s.fd.valid() ? read_run_delay(s.fd.get()) : std::nullopt) s.run_delay_ns = *delay;
      s.read_ns = now;
      continue;
    }
    if (!s.fd.valid()) continue;
    const auto delay = read_run_delay(s.fd.get());
    if (!delay) {
      s.fd = UniqueFd();  // the thread has left
      continue;
    }
    if (*delay > s.run_delay_ns) {
      const std::uint64_t waited = std::min(*delay - s.run_delay_ns, now - s.read_ns);
      trace_.host_lane(i).add({now - waited, now, 0, 2, EventKind::kPreempted});
      schedstat_ns_ += *delay - s.run_delay_ns;
    }
    s.run_delay_ns = *delay;
    s.read_ns = now;
  }
}

void RunStateSampler::stop() {
  auto& meta = trace_.metadata()["host_preemptions"];
  if (timer_) {
    timer_->cancel();
    timer_.reset();
    if (page_ == nullptr) {
      meta["samples"] = samples_;
      meta["run_delay_ns"] = schedstat_ns_;
      return;
    }
  }
  if (page_ == nullptr) return;
  if (!history_.empty()) drain_history();  // up to the end of the run
  std::uint64_t counted = 0, anomalies = 0;
  nlohmann::json unseen_by_vcpu = nlohmann::json::array();
  PreemptionCounts drawn;
  for (unsigned i = 0; i < first_.size(); ++i) {
    const auto last = runstate::read_record(page_->records()[i]);
    counted += last.preemptions - first_[i].preemptions;
    anomalies += last.anomalies - first_[i].anomalies;
    unseen_by_vcpu.push_back(last.anomalies - first_[i].anomalies);
    if (!history_.empty()) {
      drawn.exact += history_[i].drawn();
      drawn.missed += history_[i].lost();
      continue;
    }
    const PreemptionCounts& c = trace_.preemptions(i).counts();
    drawn.exact += c.exact;
    drawn.merged += c.merged;
    drawn.missed += c.missed;
  }
  meta["preemptions_counted"] = counted;  // by the page, from the start of the run to its end
  meta["exact"] = drawn.exact;
  meta["merged"] = drawn.merged;
  meta["missed"] = drawn.missed;  // mixed with sleeps between two reads, or after the thread's last read
  // Switches the program never saw (docs/runstate.md, "Accuracy and limits"):
  // each may leave one time off the CPU undrawn, the vCPU drawn running.
  meta["switches_unseen"] = anomalies;
  meta["switches_unseen_by_vcpu"] = std::move(unseen_by_vcpu);  // which vCPUs' lanes may miss one
}

}  // namespace lockvisor::trace
