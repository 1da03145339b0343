#include "vmm/pvlock/userspace_backend.h"

#include <chrono>

namespace lockvisor::pvlock {
namespace {

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace

UserspaceBackend::UserspaceBackend(unsigned vcpu_count, BackendOptions options) : options_(options) {
  slots_.reserve(vcpu_count);
  for (unsigned i = 0; i < vcpu_count; ++i) slots_.push_back(std::make_unique<Slot>(epoch_));
}

KickResult UserspaceBackend::deliver(unsigned from, int target, KickMode mode) {
  auto& sender = slots_[from]->counters;
  sender.kicks_sent.fetch_add(1, std::memory_order_relaxed);
  if (target < 0 || static_cast<std::size_t>(target) >= slots_.size()) {
    sender.kicks_invalid.fetch_add(1, std::memory_order_relaxed);
    return KickResult::kNoSuchTarget;
  }
  // The delay is a wait the end of the run cuts short (watchdog, deadlock,
  // signal, fault): a stopping run delivers the kick at once (the latch has
  // kStop by then, so it wakes nobody for long) and the vCPU leaves its loop.
  if (options_.kick_delay_us > 0) stopping_.sleep_for(std::chrono::microseconds(options_.kick_delay_us));
  Slot& slot = *slots_[static_cast<std::size_t>(target)];
  // Stamp before delivering: the woken halter reads it after consuming the kick.
  slot.counters.last_kick_ns.store(now_ns(), std::memory_order_relaxed);
  switch (slot.latch.kick(mode)) {
    case KickDelivery::kDelivered:
      slot.counters.kicks_received.fetch_add(1, std::memory_order_relaxed);
      return KickResult::kDelivered;
    case KickDelivery::kCoalesced:
      slot.counters.kicks_received.fetch_add(1, std::memory_order_relaxed);
      slot.counters.kicks_coalesced.fetch_add(1, std::memory_order_relaxed);
      return KickResult::kCoalesced;
    case KickDelivery::kDropped:
      slot.counters.kicks_dropped.fetch_add(1, std::memory_order_relaxed);
      return KickResult::kDropped;
  }
  return KickResult::kDropped;
}

HaltOutcome UserspaceBackend::halt(unsigned self) {
  Slot& slot = *slots_[self];
  slot.counters.halts.fetch_add(1, std::memory_order_relaxed);
  const HaltOutcome outcome = slot.latch.halt(std::uint64_t{options_.halt_poll_us} * 1000);
  switch (outcome) {
    case HaltOutcome::kImmediate:
      slot.counters.halts_immediate.fetch_add(1, std::memory_order_relaxed);
      break;
    case HaltOutcome::kPolled:
    case HaltOutcome::kWoken: {
      (outcome == HaltOutcome::kPolled ? slot.counters.halts_polled : slot.counters.halts_woken)
          .fetch_add(1, std::memory_order_relaxed);
      const std::uint64_t kicked = slot.counters.last_kick_ns.load(std::memory_order_relaxed);
      const std::uint64_t now = now_ns();
      if (now >= kicked && slot.wake_latency_ns.size() < kMaxLatencySamples)
        slot.wake_latency_ns.push_back(now - kicked);
      break;
    }
    case HaltOutcome::kStopped:
      break;
  }
  return outcome;
}

void UserspaceBackend::stop() {
  stopping_.set();
  for (auto& slot : slots_) slot->latch.stop();
}

std::vector<std::uint64_t> UserspaceBackend::wake_latencies(unsigned vcpu) const {
  return slots_[vcpu]->wake_latency_ns;
}

}  // namespace lockvisor::pvlock
