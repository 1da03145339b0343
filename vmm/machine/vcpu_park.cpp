#include "vmm/machine/vcpu_park.h"

#include <algorithm>

namespace lockvisor::machine {

const char* park_cause_name(ParkCause cause) {
  switch (cause) {
    case ParkCause::kInjected: return "injected";
    case ParkCause::kPaused: return "paused";
  }
  return "?";
}

void VcpuPark::update_pending_locked() {
  pending_.store(!stopped_ && (paused_ || injected_until_.has_value()), std::memory_order_release);
}

bool VcpuPark::inject(std::chrono::nanoseconds duration) {
  std::lock_guard lock(mutex_);
  if (stopped_) return false;
  const Clock::time_point until = Clock::now() + std::max(duration, std::chrono::nanoseconds{0});
  injected_until_ = injected_until_ ? std::max(*injected_until_, until) : until;
  ++counts_.requested;
  update_pending_locked();
  changed_.notify_all();
  return true;
}

bool VcpuPark::pause() {
  std::lock_guard lock(mutex_);
  if (stopped_) return false;
  paused_ = true;
  update_pending_locked();
  return true;
}

void VcpuPark::resume() {
  std::lock_guard lock(mutex_);
  paused_ = false;
  update_pending_locked();
  changed_.notify_all();
}

bool VcpuPark::paused() const {
  std::lock_guard lock(mutex_);
  return paused_;
}

bool VcpuPark::held() const {
  std::lock_guard lock(mutex_);
  return held_;
}

void VcpuPark::stop() {
  std::lock_guard lock(mutex_);
  stopped_ = true;
  update_pending_locked();
  changed_.notify_all();
}

std::optional<ParkInterval> VcpuPark::wait_while_parked() {
  std::unique_lock lock(mutex_);
  if (stopped_ || (!paused_ && !injected_until_)) return std::nullopt;
  const Clock::time_point begin = Clock::now();
  held_ = true;
  if (injected_until_) {
    // An injected preemption first (a pause arriving meanwhile is served by
    // the next call, so each interval has one cause). inject() may move the
    // end later while we sleep: wait for whatever it says now.
    while (!stopped_ && injected_until_ && Clock::now() < *injected_until_) {
      const Clock::time_point until = *injected_until_;
      changed_.wait_until(lock, until);
    }
    injected_until_.reset();
    held_ = false;
    const Clock::time_point end = Clock::now();
    ++counts_.parks;
    counts_.parked_ns += static_cast<std::uint64_t>(std::chrono::nanoseconds(end - begin).count());
    update_pending_locked();
    return ParkInterval{ParkCause::kInjected, begin, end};
  }
  changed_.wait(lock, [this] { return stopped_ || !paused_; });
  held_ = false;
  const Clock::time_point end = Clock::now();
  ++counts_.pauses;
  counts_.paused_ns += static_cast<std::uint64_t>(std::chrono::nanoseconds(end - begin).count());
  update_pending_locked();
  return ParkInterval{ParkCause::kPaused, begin, end};
}

ParkCounts VcpuPark::counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

}  // namespace lockvisor::machine
