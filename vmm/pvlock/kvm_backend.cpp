#include "vmm/pvlock/kvm_backend.h"

#include <stdexcept>

#include "vmm/pvlock/userspace_backend.h"

namespace lockvisor::pvlock {

const char* backend_kind_name(BackendKind kind) { return kind == BackendKind::kKvm ? "kvm" : "userspace"; }

std::unique_ptr<PvBackend> make_backend(BackendKind kind, unsigned vcpu_count, BackendOptions options) {
  if (kind == BackendKind::kKvm) return std::make_unique<KvmBackend>(vcpu_count, options);
  return std::make_unique<UserspaceBackend>(vcpu_count, options);
}

VmSetup vm_setup_for(BackendKind kind, const BackendOptions& options) {
  return kind == BackendKind::kKvm ? KvmBackend::setup(options) : UserspaceBackend::setup();
}

KvmBackend::KvmBackend(unsigned vcpu_count, BackendOptions options) : options_(options) {
  slots_.reserve(vcpu_count);
  for (unsigned i = 0; i < vcpu_count; ++i) slots_.push_back(std::make_unique<Slot>());
}

void KvmBackend::attach_vcpu(unsigned vcpu, UniqueFd stats_fd) {
  slots_.at(vcpu)->stats = kvm::BinaryStats(std::move(stats_fd));
}

KickResult KvmBackend::kick(unsigned from, int target) {
  Slot& sender = *slots_[from];
  sender.doorbell_kicks.fetch_add(1, std::memory_order_relaxed);
  if (target < 0 || static_cast<std::size_t>(target) >= slots_.size()) {
    sender.doorbell_kicks_invalid.fetch_add(1, std::memory_order_relaxed);
    return KickResult::kNoSuchTarget;
  }
  slots_[static_cast<std::size_t>(target)]->counters.kicks_dropped.fetch_add(1, std::memory_order_relaxed);
  return KickResult::kDropped;
}

std::optional<std::string> KvmBackend::set_kick_mode(KickMode mode) {
  if (mode == KickMode::kSticky) return std::nullopt;  // what it is already
  return std::string("the kvm backend cannot switch --kick: KVM delivers KICK_CPU in the kernel and its pv_unhalted is always sticky");
}

HaltOutcome KvmBackend::halt(unsigned self, std::uint64_t) {
  slots_[self]->unexpected_halts.fetch_add(1, std::memory_order_relaxed);
  return HaltOutcome::kImmediate;
}

VcpuPvState KvmBackend::vcpu_state(unsigned vcpu) const {
  const auto blocking = slots_[vcpu]->stats.value("blocking");
  if (!blocking) return {false, false, false};
  return {*blocking != 0, false, true};
}

std::uint64_t KvmBackend::epoch() const {
  std::uint64_t sum = 0;
  for (const auto& slot : slots_)
    for (const char* name : {"halt_exits", "halt_wakeup", "hypercalls"}) sum += slot->stats.value(name).value_or(0);
  return sum;
}

const VcpuPvCounters& KvmBackend::counters(unsigned vcpu) const {
  const Slot& slot = *slots_[vcpu];
  const auto stat = [&](const char* name) { return slot.stats.value(name).value_or(0); };
  VcpuPvCounters& c = slot.counters;
  const std::uint64_t halts = stat("halt_exits") + slot.unexpected_halts.load();
  const std::uint64_t woken = stat("halt_wakeup");
  const std::uint64_t polled = stat("halt_successful_poll");
  c.halts.store(halts);
  c.halts_woken.store(woken);
  c.halts_polled.store(polled);
  c.halts_immediate.store(halts > woken + polled ? halts - woken - polled : 0);
  c.kicks_sent.store(stat("hypercalls") + slot.doorbell_kicks.load());
  c.kicks_invalid.store(slot.doorbell_kicks_invalid.load());
  return c;
}

}  // namespace lockvisor::pvlock
