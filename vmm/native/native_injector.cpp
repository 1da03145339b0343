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

  Clock::duration next_gap() {
    return std::chrono::duration_cast<Clock::duration>(inject::next_timed_gap(*spec, fired, stream));
  }
  bool done() const { return inject::timed_done(*spec, fired); }
};

NativeInjector::NativeInjector(const std::vector<inject::InjectSpec>& specs, std::uint64_t run_seed,
                               ThreadParks& parks)
    : parks_(parks),
      specs_(specs),
      probe_(inject::lock_probe_config(specs, run_seed)),
      area_(probe_ ? std::make_unique<abi::LockProbeArea>() : nullptr),
      counts_(parks.threads()) {
  for (const auto& s : specs_) {
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
  for (auto& t : timed_) t.due = now + t.next_gap();
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
    t.due += t.next_gap();
    queue.push(static_cast<std::size_t>(&t - timed_.data()));
  }
}

// A chosen point: the thread parks itself there for the target's length
// (ThreadParks::park on its own thread has slept before it returns).
void NativeInjector::park_at(unsigned thread, const workloads::probe::Point& point) {
  if (!point.chosen) return;
  const auto kind = point.kind == abi::PreemptKind::kHolder ? inject::InjectKind::kHolder : inject::InjectKind::kWaiter;
  const std::uint64_t ns = probe_->targets[static_cast<unsigned>(point.kind)].duration_ns;
  if (!parks_.park(thread, std::chrono::nanoseconds(ns))) return;
  NativeInjectCounts& k = counts_[thread].kinds[static_cast<unsigned>(kind)];
  ++k.count;
  k.ns += ns;
}

void NativeInjector::on_arrive(unsigned thread, unsigned lock) {
  workloads::probe::arrive(*probe_, *area_, thread, lock);
}

void NativeInjector::on_acquired(unsigned thread, unsigned lock) {
  park_at(thread, workloads::probe::acquired(*probe_, *area_, thread, lock));
}

void NativeInjector::on_release(unsigned thread, unsigned lock) {
  workloads::probe::release(*probe_, *area_, thread, lock);
}

void NativeInjector::on_spin(unsigned thread) { park_at(thread, workloads::probe::spin(*probe_, *area_, thread)); }

std::array<NativeInjectCounts, inject::kInjectKinds> NativeInjector::counts(unsigned thread) const {
  auto kinds = counts_.at(thread).kinds;
  if (area_) {
    const abi::LockProbeCpu& rec = area_->cpus[thread];
    for (const auto& [kind, pk] : {std::pair{inject::InjectKind::kHolder, abi::PreemptKind::kHolder},
                                  std::pair{inject::InjectKind::kWaiter, abi::PreemptKind::kWaiter}}) {
      kinds[static_cast<unsigned>(kind)].events = rec.events[static_cast<unsigned>(pk)];
      kinds[static_cast<unsigned>(kind)].points = rec.points[static_cast<unsigned>(pk)];
    }
  }
  return kinds;
}

}  // namespace lockvisor::native
