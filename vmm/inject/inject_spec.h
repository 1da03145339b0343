// --inject SPEC: one preemption-injection schedule (docs/preemption.md).
//
//   periodic:vcpu=N|all,every=DUR,for=DUR[,phase=DUR][,count=N]
//   random:vcpu=N|all,rate=HZ,for=DUR[,seed=N][,count=N]
//   holder:lock=N|any,every=N|p=P,for=DUR[,seed=N]
//   waiter:lock=N|any,every=N|p=P,for=DUR[,seed=N]
//
// DUR is an integer with a unit: ns, us, ms or s ("500us"). periodic
// deschedules vCPU N (or each vCPU) for `for` every `every`, the first time
// `phase` after the run starts; random does it at Poisson arrivals of `rate`
// per second per vCPU; both stop after `count` injections per vCPU when
// given. holder/waiter deschedule a vCPU for `for` at the moment it acquires
// lock slot N (holder) or is enqueued as the first waiter behind its holder
// (waiter): every Nth such event per vCPU (`every=N`, at a seeded phase), or
// each with probability P (`p=P`). seed= overrides the run's --seed for this
// schedule. One value may hold several specs separated by ';'.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockvisor/abi/lock_probe.h"

namespace lockvisor::inject {

enum class InjectKind { kPeriodic, kRandom, kHolder, kWaiter };
inline constexpr unsigned kInjectKinds = 4;
const char* inject_kind_name(InjectKind kind);

struct InjectSpec {
  InjectKind kind = InjectKind::kPeriodic;
  std::optional<unsigned> vcpu;   // periodic/random: nullopt = every vCPU
  std::optional<unsigned> lock;   // holder/waiter: nullopt = any lock
  std::chrono::nanoseconds duration{0};  // "for"
  std::chrono::nanoseconds interval{0};  // periodic "every"
  std::chrono::nanoseconds phase{0};     // periodic
  double rate_hz = 0;                    // random
  std::uint64_t every_events = 0;        // holder/waiter "every"
  double probability = 0;                // holder/waiter "p"
  std::optional<std::uint64_t> count;    // periodic/random: injections per vCPU
  std::optional<std::uint64_t> seed;

  bool targeted() const { return kind == InjectKind::kHolder || kind == InjectKind::kWaiter; }
};

// Parses one spec; throws lockvisor::Error (usage, one line naming the spec).
InjectSpec parse_inject_spec(std::string_view text);
// Parses a --inject value: one or more specs separated by ';'.
std::vector<InjectSpec> parse_inject_specs(std::string_view text);
// The canonical text of a spec (parses back to the same spec).
std::string format_inject_spec(const InjectSpec& spec);

// Checks the specs against the VM: vCPU indices below `vcpus`, at most one
// holder and one waiter schedule. Throws lockvisor::Error (usage).
void validate_inject_specs(const std::vector<InjectSpec>& specs, unsigned vcpus);

// The targeted schedules as the guest sees them (BootInfo::lock_probe);
// nullopt when there is no holder or waiter spec. `run_seed`: --seed.
std::optional<abi::LockProbeConfig> lock_probe_config(const std::vector<InjectSpec>& specs, std::uint64_t run_seed);

}  // namespace lockvisor::inject
