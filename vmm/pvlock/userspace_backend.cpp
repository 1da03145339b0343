#include "vmm/pvlock/userspace_backend.h"

#include <sched.h>

#include <chrono>

#include "vmm/util/error.h"
#include "vmm/util/monotonic_clock.h"

namespace lockvisor::pvlock {

UserspaceBackend::UserspaceBackend(unsigned vcpu_count, BackendOptions options)
    : options_(options), mode_(options.mode) {
  slots_.reserve(vcpu_count);
  for (unsigned i = 0; i < vcpu_count; ++i) slots_.push_back(std::make_unique<Slot>(epoch_, options_.halt_poll));
  std::string why;
  options_.boost = resolve_boost_mechanism(options_.boost, &why);
  if (options_.kick_boost && options_.boost == BoostMechanism::kOff)
    fail_host("--kick-boost on: no boost mechanism ({})", why);
  booster_ = std::make_unique<VcpuBooster>(
      vcpu_count, options_.boost, std::chrono::microseconds(options_.boost_bound_us), [this](unsigned vcpu, bool expired) {
        (expired ? slots_[vcpu]->counters.boosts_expired : slots_[vcpu]->counters.boosts)
            .fetch_add(1, std::memory_order_relaxed);
      });
}

void UserspaceBackend::on_entry(unsigned vcpu) {
  Slot& slot = *slots_[vcpu];
  if (options_.kick_yield || options_.boost != BoostMechanism::kOff)
    slot.last_cpu.store(::sched_getcpu(), std::memory_order_relaxed);
  booster_->attach(vcpu);
  booster_->release(vcpu);  // a boosted vCPU that calls in is done with the CPU it was given
}

bool UserspaceBackend::shares_cpu_with(unsigned vcpu) const {
  const int theirs = slots_[vcpu]->last_cpu.load(std::memory_order_relaxed);
  return theirs >= 0 && theirs == ::sched_getcpu();
}

KickResult UserspaceBackend::deliver(unsigned from, int target, KickMode mode) {
  on_entry(from);
  auto& sender = slots_[from]->counters;
  sender.kicks_sent.fetch_add(1, std::memory_order_relaxed);
  if (target < 0 || static_cast<std::size_t>(target) >= slots_.size()) {
    sender.kicks_invalid.fetch_add(1, std::memory_order_relaxed);
    return KickResult::kNoSuchTarget;
  }
  // The delay is a wait the end of the run cuts short (watchdog, deadlock,
  // signal, fault): a stopping run delivers the kick at once (the latch has
  // kStop by then, so it wakes nobody for long) and the vCPU leaves its loop.
  // Only a delay under way when the end came counts as cut.
  if (options_.kick_delay_us > 0 && !stopping_.is_set() &&
      stopping_.sleep_for(std::chrono::microseconds(options_.kick_delay_us)))
    sender.kick_delays_cut.fetch_add(1, std::memory_order_relaxed);
  const auto index = static_cast<unsigned>(target);
  Slot& slot = *slots_[index];
  const bool was_halted = (slot.latch.state() & KickLatch::kHalted) != 0;
  // Stamp before delivering: the woken halter takes it after consuming the kick.
  const std::uint64_t sent = monotonic_ns();
  const bool stamped = slot.kick_stamp.on_send(sent);
  const std::uint64_t flow = kick_observer_ ? trace_kick_begin(from, slot) : 0;
  const KickDelivery delivery = slot.latch.kick(mode);
  if (flow != 0) trace_kick_sent(from, index, slot, flow, sent, delivery == KickDelivery::kDelivered);
  switch (delivery) {
    case KickDelivery::kDelivered:
      slot.counters.kicks_received.fetch_add(1, std::memory_order_relaxed);
      if (was_halted && index != from) {
        if (options_.kick_boost) booster_->boost(index);
        // Directed yield (KVM's kvm_sched_yield on KICK_CPU): the woken vCPU
        // last ran on this CPU, so give it the CPU now rather than at the end
        // of this thread's slice.
        if (options_.kick_yield && shares_cpu_with(index)) {
          sender.kick_yields.fetch_add(1, std::memory_order_relaxed);
          ::sched_yield();
        }
      }
      return KickResult::kDelivered;
    case KickDelivery::kCoalesced:
      // Not the kick that wakes anyone: never leave its time behind.
      slot.kick_stamp.on_drop(sent, stamped);
      slot.counters.kicks_received.fetch_add(1, std::memory_order_relaxed);
      slot.counters.kicks_coalesced.fetch_add(1, std::memory_order_relaxed);
      return KickResult::kCoalesced;
    case KickDelivery::kDropped:
      slot.kick_stamp.on_drop(sent, stamped);
      slot.counters.kicks_dropped.fetch_add(1, std::memory_order_relaxed);
      return KickResult::kDropped;
  }
  return KickResult::kDropped;
}

HaltOutcome UserspaceBackend::halt(unsigned self, std::uint64_t limit_ns) {
  on_entry(self);
  Slot& slot = *slots_[self];
  slot.counters.halts.fetch_add(1, std::memory_order_relaxed);
  const std::uint64_t window = slot.poll.window_ns();
  const std::uint64_t start = monotonic_ns();
  std::uint64_t polled = 0;
  const HaltOutcome outcome = slot.latch.halt(window, &polled, limit_ns);
  if (outcome == HaltOutcome::kStopped) return outcome;
  if (outcome == HaltOutcome::kExpired) {
    // No kick consumed: the stamp and the trace flow stay for the kick that
    // comes, and the poll window learns nothing from a halt nobody ended.
    slot.counters.halts_expired.fetch_add(1, std::memory_order_relaxed);
    slot.counters.halt_poll_ns.fetch_add(polled, std::memory_order_relaxed);
    return outcome;
  }
  if (kick_observer_) trace_kick_consumed(self, slot);
  const std::uint64_t sent = slot.kick_stamp.take();  // every consumed kick empties the stamp
  if (outcome == HaltOutcome::kImmediate) {
    slot.counters.halts_immediate.fetch_add(1, std::memory_order_relaxed);
    return outcome;
  }
  const std::uint64_t now = monotonic_ns();
  slot.counters.halt_poll_ns.fetch_add(polled, std::memory_order_relaxed);
  if (outcome == HaltOutcome::kPolled) {
    slot.counters.halts_polled.fetch_add(1, std::memory_order_relaxed);
  } else {
    slot.counters.halts_woken.fetch_add(1, std::memory_order_relaxed);
    if (window > 0) slot.counters.halt_polls_failed.fetch_add(1, std::memory_order_relaxed);
  }
  slot.poll.update(now - start);
  if (sent != 0 && now >= sent && slot.wake_latency_ns.size() < kMaxLatencySamples)
    slot.wake_latency_ns.push_back(now - sent);
  return outcome;
}

// Flow ids: the kicker's index + 1 in the top bits, its own count below, so
// no two kicks share one and no shared counter is needed. A kick gets a flow
// only if its target holds none (a coalesced kick rides on the pending one).
std::uint64_t UserspaceBackend::trace_kick_begin(unsigned from, Slot& target) {
  const std::uint64_t flow = (std::uint64_t{from} + 1) << 40 | ++slots_[from]->flows_sent;
  std::uint64_t none = 0;
  return target.trace_flow.compare_exchange_strong(none, flow) ? flow : 0;
}

// A delivered kick's flow is reported; one that was not delivered takes its
// id back, unless a halt already consumed it (a pending kick woke the
// target meanwhile): then both ends exist and it is reported too.
void UserspaceBackend::trace_kick_sent(unsigned from, unsigned target, Slot& slot, std::uint64_t flow,
                                       std::uint64_t sent, bool delivered) {
  std::uint64_t mine = flow;
  if (delivered || !slot.trace_flow.compare_exchange_strong(mine, 0)) kick_observer_->on_kick(from, target, flow, sent);
}

void UserspaceBackend::trace_kick_consumed(unsigned self, Slot& slot) {
  if (const std::uint64_t flow = slot.trace_flow.exchange(0)) kick_observer_->on_kick_consumed(self, flow);
}

void UserspaceBackend::yield_to(unsigned from, int target) {
  on_entry(from);
  slots_[from]->counters.yield_to_calls.fetch_add(1, std::memory_order_relaxed);
  if (target < 0 || static_cast<std::size_t>(target) >= slots_.size() || static_cast<unsigned>(target) == from) return;
  const auto index = static_cast<unsigned>(target);
  booster_->boost(index);
  // SCHED_FIFO preempts the caller by itself when they share a CPU; the other
  // mechanisms need the caller to step aside.
  if (options_.boost != BoostMechanism::kFifo && shares_cpu_with(index)) ::sched_yield();
}

void UserspaceBackend::stop() {
  stopping_.set();
  for (auto& slot : slots_) slot->latch.stop();
  booster_->stop();
}

std::vector<std::uint64_t> UserspaceBackend::wake_latencies(unsigned vcpu) const {
  return slots_[vcpu]->wake_latency_ns;
}

}  // namespace lockvisor::pvlock
