#include "vmm/trace/preemption_history.h"

namespace lockvisor::trace {
namespace {
constexpr std::uint64_t kSlots = LOCKVISOR_PREEMPTION_HISTORY_SLOTS;

std::uint64_t load_count(const lockvisor_preemption_history& ring) {
  return __atomic_load_n(&ring.count, __ATOMIC_ACQUIRE);
}
}  // namespace

void PreemptionHistoryReader::start(const lockvisor_preemption_history& ring) noexcept { next_ = load_count(ring); }

void PreemptionHistoryReader::drain(const lockvisor_preemption_history& ring, TraceBuffer& lane) noexcept {
  const std::uint64_t count = load_count(ring);
  if (count < next_) {  // cannot happen unless the ring was replaced: a new baseline
    next_ = count;
    return;
  }
  if (count - next_ > kSlots) {  // lapped before this read
    lost_ += count - next_ - kSlots;
    next_ = count - kSlots;
  }
  // Copy first, then check which copies the writer may have touched meanwhile.
  lockvisor_preemption_interval copies[kSlots];
  const std::uint64_t first = next_;
  for (std::uint64_t k = first; k < count; ++k) {
    const auto& slot = ring.slot[k % kSlots];
    copies[k - first] = {__atomic_load_n(&slot.begin_ns, __ATOMIC_RELAXED),
                         __atomic_load_n(&slot.end_ns, __ATOMIC_RELAXED)};
  }
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  const std::uint64_t after = load_count(ring);
  for (std::uint64_t k = first; k < count; ++k) {
    const auto& c = copies[k - first];
    // Slot k is rewritten by write number k + kSlots: once `after` is past it.
    if (after >= k + kSlots || c.end_ns < c.begin_ns) {
      ++lost_;
      continue;
    }
    lane.add({c.begin_ns, c.end_ns, 0, 1, EventKind::kPreempted});
    ++drawn_;
  }
  next_ = count;
}

}  // namespace lockvisor::trace
