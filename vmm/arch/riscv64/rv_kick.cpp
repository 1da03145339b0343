#include "vmm/arch/riscv64/rv_kick.h"

namespace lockvisor::arch::riscv64 {

RvKicks::RvKicks(unsigned harts, KickMode mode, Hooks hooks) : mode_(mode), hooks_(std::move(hooks)) {
  harts_.reserve(harts);
  for (unsigned i = 0; i < harts; ++i) harts_.push_back(std::make_unique<Hart>());
}

void RvKicks::kick(unsigned from, unsigned target) {
  {
    const std::lock_guard lock(harts_[from]->mutex);
    ++harts_[from]->counts.kicks_sent;
  }
  Hart& t = *harts_[target];
  const std::lock_guard lock(t.mutex);
  if (mode_ == KickMode::kProposed) {
    // Read before the signal: a hart that was not blocking when the kick
    // came loses it, whatever it does next.
    if (hooks_.blocking(target)) {
      ++t.counts.kicks_received;
    } else {
      ++t.counts.kicks_dropped;
    }
    hooks_.interrupt_run(target);
    return;
  }
  if (t.latched) {
    ++t.counts.kicks_coalesced;
    return;
  }
  t.latched = true;
  ++t.counts.kicks_received;
  hooks_.set_line(target, true);
}

bool RvKicks::acknowledge(unsigned hart) {
  Hart& h = *harts_[hart];
  const std::lock_guard lock(h.mutex);
  if (!h.latched) return false;
  ++h.acks;
  h.latched = false;
  hooks_.set_line(hart, false);
  return true;
}

bool RvKicks::latched(unsigned hart) const {
  const std::lock_guard lock(harts_[hart]->mutex);
  return harts_[hart]->latched;
}

pvlock::PvCounts RvKicks::counts(unsigned hart) const {
  const std::lock_guard lock(harts_[hart]->mutex);
  return harts_[hart]->counts;
}

std::uint64_t RvKicks::acks(unsigned hart) const {
  const std::lock_guard lock(harts_[hart]->mutex);
  return harts_[hart]->acks;
}

}  // namespace lockvisor::arch::riscv64
