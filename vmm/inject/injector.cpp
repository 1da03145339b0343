#include "vmm/inject/injector.h"

#include <boost/asio/steady_timer.hpp>
#include <cstring>

#include <fmt/format.h>

#include "vmm/inject/schedule_math.h"

namespace lockvisor::inject {
namespace asio = boost::asio;
using std::chrono::nanoseconds;

// One timed schedule on one vCPU.
struct Injector::Timed {
  Timed(asio::io_context& io, const InjectSpec& s, unsigned v, std::uint64_t seed)
      : timer(io), spec(s), vcpu(v), stream(seed, v) {}
  asio::steady_timer timer;
  const InjectSpec& spec;
  unsigned vcpu;
  SeededStream stream;
  machine::VcpuRunner* runner = nullptr;
  std::chrono::steady_clock::time_point due;
  std::uint64_t fired = 0;
};

Injector::Injector(std::vector<InjectSpec> specs, std::uint64_t run_seed, unsigned vcpus)
    : specs_(std::move(specs)), run_seed_(run_seed), probe_(lock_probe_config(specs_, run_seed)), counts_(vcpus) {
  for (const auto& s : specs_) has_kind_[static_cast<unsigned>(s.kind)] = true;
}

Injector::~Injector() = default;

void Injector::arm(Timed& t) {
  if (timed_done(t.spec, t.fired)) return;
  // Absolute due times: a late wake-up does not shift the later ones.
  t.due += std::chrono::duration_cast<std::chrono::steady_clock::duration>(next_timed_gap(t.spec, t.fired, t.stream));
  t.timer.expires_at(t.due);
  t.timer.async_wait([this, &t](const boost::system::error_code& ec) {
    if (ec) return;
    ++t.fired;
    if (t.runner->inject_preemption(t.spec.duration)) {
      KindCounts& k = counts_[t.vcpu].kinds[static_cast<unsigned>(t.spec.kind)];
      ++k.count;
      k.ns += static_cast<std::uint64_t>(t.spec.duration.count());
    }
    if (!t.runner->finished()) arm(t);
  });
}

void Injector::start(machine::RunContext& context) {
  const auto now = std::chrono::steady_clock::now();
  for (const auto& s : specs_) {
    if (s.targeted()) continue;
    for (const auto& runner : context.vcpus) {
      if (s.vcpu && *s.vcpu != runner->index()) continue;
      auto t = std::make_unique<Timed>(context.io, s, runner->index(), s.seed.value_or(run_seed_));
      t->runner = runner.get();
      t->due = now;
      arm(*t);
      timed_.push_back(std::move(t));
    }
  }
  if (probe_) {
    for (const auto& runner : context.vcpus)
      runner->on_preempt_point = [this](unsigned vcpu, std::span<const std::byte> memory,
                                        const std::uint64_t (&args)[3]) { return preemption_point(vcpu, memory, args); };
  }
}

// The timers go now, not with the service: they belong to the run's
// io_context, which is destroyed before the Machine (run_service.h).
void Injector::stop() {
  for (auto& t : timed_) t->timer.cancel();
  timed_.clear();
}

machine::VcpuRunner::PreemptVerdict Injector::preemption_point(unsigned vcpu, std::span<const std::byte> memory,
                                                               const std::uint64_t (&args)[3]) {
  const auto refuse = [](std::string why) { return machine::VcpuRunner::PreemptVerdict{nanoseconds{0}, std::move(why)}; };
  if (!probe_ || vcpu >= counts_.size()) return refuse("preemption point but no targeted --inject schedule is armed");
  const std::uint64_t kind_arg = args[0], lock = args[1], index = args[2];
  if (kind_arg >= abi::kPreemptKinds) return refuse(fmt::format("preemption point of unknown kind {}", kind_arg));
  const auto kind = static_cast<abi::PreemptKind>(kind_arg);
  const abi::PreemptTarget& target = probe_->targets[kind_arg];
  const char* name = kind == abi::PreemptKind::kHolder ? "holder" : "waiter";
  if (!abi::target_armed(target)) return refuse(fmt::format("{} preemption point but no {} schedule is armed", name, name));
  if (lock >= abi::kLockProbeSlots || (target.lock != abi::kProbeAnyLock && lock != target.lock))
    return refuse(fmt::format("{} preemption point on lock slot {}, not the targeted one", name, lock));
  if (!abi::preempt_point_chosen(probe_->seed, vcpu, kind, index, target))
    return refuse(fmt::format("{} preemption point at event {}, which the seeded schedule did not choose", name, index));
  KindCounts& k = counts_[vcpu].kinds[kind == abi::PreemptKind::kHolder ? static_cast<unsigned>(InjectKind::kHolder)
                                                                         : static_cast<unsigned>(InjectKind::kWaiter)];
  if (k.last_index && index <= *k.last_index)
    return refuse(fmt::format("{} preemption point at event {} after event {} (indices must grow)", name, index,
                              *k.last_index));
  // The vCPU's probe record must say the same thing (it is stopped: stable).
  const std::uint64_t at = abi::kLockProbeAddr + std::uint64_t{vcpu} * sizeof(abi::LockProbeCpu);
  if (at + sizeof(abi::LockProbeCpu) > memory.size()) return refuse("lock probe record outside guest memory");
  abi::LockProbeCpu rec;
  std::memcpy(&rec, memory.data() + at, sizeof rec);
  const auto want = kind == abi::PreemptKind::kHolder ? abi::ProbeState::kHolding : abi::ProbeState::kWaiting;
  if (rec.state != static_cast<abi::u32>(want) || rec.lock != lock || rec.events[kind_arg] != index + 1 ||
      (kind == abi::PreemptKind::kWaiter && rec.ahead != 1))
    return refuse(fmt::format("{} preemption point at event {} on lock {} disagrees with the vCPU's probe record "
                              "(state {}, lock {}, ahead {}, events {})",
                              name, index, lock, rec.state, rec.lock, rec.ahead, rec.events[kind_arg]));
  k.last_index = index;
  ++k.count;
  k.ns += target.duration_ns;
  if (k.events.size() < kMaxRecordedEvents) k.events.push_back(index);
  return {nanoseconds{static_cast<std::int64_t>(target.duration_ns)}, {}};
}

void Injector::report(machine::RunResult& result) {
  for (auto& v : result.vcpus) {
    if (v.index >= counts_.size()) continue;
    for (unsigned kind = 0; kind < kInjectKinds; ++kind) {
      if (!has_kind_[kind]) continue;
      const KindCounts& k = counts_[v.index].kinds[kind];
      machine::InjectedKindCounts out;
      out.count = k.count;
      out.ns = k.ns;
      const auto ik = static_cast<InjectKind>(kind);
      if (ik == InjectKind::kHolder || ik == InjectKind::kWaiter) {
        const unsigned pk = static_cast<unsigned>(ik == InjectKind::kHolder ? abi::PreemptKind::kHolder
                                                                            : abi::PreemptKind::kWaiter);
        const auto value = [&](const char* key) -> std::optional<std::uint64_t> {
          const auto* r = result.result(v.index, key);
          if (r == nullptr || r->values.size() != 1) return std::nullopt;
          return r->values[0];
        };
        out.guest_count = value(abi::kProbePointsKeys[pk]);
        out.guest_events = value(abi::kProbeEventsKeys[pk]);
        out.event_indices = k.events;
      }
      v.injected[inject_kind_name(ik)] = std::move(out);
    }
  }
}

}  // namespace lockvisor::inject
