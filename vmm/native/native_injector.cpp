#include "vmm/native/native_injector.h"

#include <algorithm>
#include <chrono>
#include <queue>

#include "vmm/inject/schedule_math.h"

namespace lockvisor::native {

using Clock = std::chrono::steady_clock;

// One timed schedule on one thread.
struct NativeInjector::Timed {
  const inject::InjectSpec* spec;
  unsigned thread;
  inject::SeededStream stream;
  Clock::time_point due;
  std::uint64_t fired = 0;

  std::chrono::nanoseconds next_gap() {
    if (spec->kind == inject::InjectKind::kPeriodic) return fired == 0 ? spec->phase : spec->interval;
    return inject::poisson_gap(stream.uniform(), spec->rate_hz);
  }
  bool done() const { return spec->count && fired >= *spec->count; }
};

NativeInjector::NativeInjector(const std::vector<inject::InjectSpec>& specs, std::uint64_t run_seed,
                               ThreadParks& parks)
    : parks_(parks), specs_(specs), holder_(inject::lock_probe_config(specs, run_seed)), counts_(parks.threads()) {
  for (const auto& s : specs_) {
    if (s.kind == inject::InjectKind::kWaiter) continue;  // refused before the run (validate_params_and_cpus)
    has_kind_[static_cast<unsigned>(s.kind)] = true;
    if (s.targeted()) continue;
    for (unsigned t = 0; t < parks.threads(); ++t) {
      if (s.vcpu && *s.vcpu != t) continue;
      timed_.push_back({&s, t, inject::SeededStream(s.seed.value_or(run_seed), t), {}, 0});
    }
  }
}

NativeInjector::~NativeInjector() { stop(); }

void NativeInjector::start() {
  if (timed_.empty()) return;
  const auto now = Clock::now();
  for (auto& t : timed_) t.due = now + std::chrono::duration_cast<Clock::duration>(t.next_gap());
  thread_ = std::thread([this] { loop(); });
}

void NativeInjector::stop() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (!thread_.joinable()) return;
  thread_.join();
  const auto now = Clock::now();
  for (const auto& t : timed_)
    if (!t.done() && t.due < now) behind_ = std::max(behind_, std::chrono::duration_cast<std::chrono::nanoseconds>(now - t.due));
}

void NativeInjector::loop() {
  // Earliest due first.
  const auto later = [this](std::size_t a, std::size_t b) { return timed_[a].due > timed_[b].due; };
  std::priority_queue<std::size_t, std::vector<std::size_t>, decltype(later)> queue(later);
  for (std::size_t i = 0; i < timed_.size(); ++i)
    if (!timed_[i].done()) queue.push(i);
  std::unique_lock lock(mutex_);
  while (!queue.empty()) {
    Timed& t = timed_[queue.top()];
    if (wake_.wait_until(lock, t.due, [this] { return stopping_; })) return;
    queue.pop();
    ++t.fired;
    if (parks_.park(t.thread, t.spec->duration)) {
      NativeInjectCounts& k = counts_[t.thread].kinds[static_cast<unsigned>(t.spec->kind)];
      ++k.count;
      k.ns += static_cast<std::uint64_t>(t.spec->duration.count());
    }
    if (t.done()) continue;
    t.due += std::chrono::duration_cast<Clock::duration>(t.next_gap());
    queue.push(static_cast<std::size_t>(&t - timed_.data()));
  }
}

void NativeInjector::on_acquired(unsigned thread, unsigned lock) {
  if (!holder_ || thread >= counts_.size()) return;
  const abi::PreemptTarget& target = holder_->targets[static_cast<unsigned>(abi::PreemptKind::kHolder)];
  if (!abi::target_armed(target) || (target.lock != abi::kProbeAnyLock && lock != target.lock)) return;
  NativeInjectCounts& k = counts_[thread].kinds[static_cast<unsigned>(inject::InjectKind::kHolder)];
  const std::uint64_t index = k.events++;
  if (!abi::preempt_point_chosen(holder_->seed, thread, abi::PreemptKind::kHolder, index, target)) return;
  if (parks_.park(thread, std::chrono::nanoseconds(target.duration_ns))) {
    ++k.count;
    k.ns += target.duration_ns;
  }
}

}  // namespace lockvisor::native
