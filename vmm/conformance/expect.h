// How a freestanding conformance case states what must have happened:
// Expect(run).outcome(...).pv(...).exits(...).done() reads the run's
// outcome, the VMM's PV counters, KVM's own statistics, exit counts and the
// guest's reported results, and keeps the first expectation that failed, as
// one line naming the vCPU, the counter and both values. The cases
// (cases.cpp) are written in nothing else, so every failure reads alike.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "vmm/machine/run_result.h"
#include "vmm/pvlock/pv_counters.h"

namespace lockvisor::conformance {

// nullopt when the run behaved as specified, otherwise why not (one line).
using Check = std::optional<std::string>;

// Accumulates the first failed expectation.
class Expect {
 public:
  explicit Expect(const machine::RunResult& run) : run_(run) {}
  Expect& outcome(machine::Outcome expected) {
    if (!failure_ && run_.outcome != expected)
      failure_ = fmt::format("expected outcome {}, got {} ({})", machine::outcome_name(expected),
                             machine::outcome_name(run_.outcome), run_.reason);
    return *this;
  }
  Expect& pv(unsigned vcpu, std::uint64_t pvlock::PvCounts::*counter, std::uint64_t expected) {
    if (!failure_ && run_.pv(vcpu).*counter != expected)
      failure_ = fmt::format("vCPU {} {}: expected {}, counted {}", vcpu, pvlock::pv_counter_name(counter), expected,
                             run_.pv(vcpu).*counter);
    return *this;
  }
  // One of KVM's own per-vCPU statistics (--backend kvm).
  Expect& kvm(unsigned vcpu, const char* stat, std::uint64_t expected) {
    const auto& stats = run_.vcpus.at(vcpu).kvm;
    const auto it = stats.find(stat);
    if (!failure_ && it == stats.end()) failure_ = fmt::format("vCPU {}: KVM has no statistic {}", vcpu, stat);
    if (!failure_ && it->second != expected)
      failure_ = fmt::format("vCPU {} KVM {}: expected {}, counted {}", vcpu, stat, expected, it->second);
    return *this;
  }
  // KVM's halt_wakeup also counts wake-ups that leave the vCPU blocked (it
  // re-checks and sleeps again) and the end-of-run signal: a lower bound. It
  // can also miss a wake-up: a kick that lands after KVM marks the vCPU
  // blocking but before its task sleeps is caught by the block's own re-check
  // and counted in no statistic. So a lower bound of one holds only over many
  // blocked halts; for a single one, the run completing is what proves that
  // the kick released it (a halt nobody released ends the run in a deadlock).
  Expect& kvm_at_least(unsigned vcpu, const char* stat, std::uint64_t minimum) {
    const auto& stats = run_.vcpus.at(vcpu).kvm;
    const auto it = stats.find(stat);
    if (!failure_ && it == stats.end()) failure_ = fmt::format("vCPU {}: KVM has no statistic {}", vcpu, stat);
    if (!failure_ && it->second < minimum)
      failure_ = fmt::format("vCPU {} KVM {}: expected at least {}, counted {}", vcpu, stat, minimum, it->second);
    return *this;
  }
  Expect& exits(unsigned vcpu, const char* kind, std::uint64_t expected) {
    const auto& exits = run_.vcpus.at(vcpu).exits;
    const std::uint64_t got = exits.count(kind) ? exits.at(kind) : 0;
    if (!failure_ && got != expected)
      failure_ = fmt::format("vCPU {} {} exits: expected {}, counted {}", vcpu, kind, expected, got);
    return *this;
  }
  Expect& result(unsigned vcpu, const char* key, std::uint64_t expected) {
    const auto* r = run_.result(vcpu, key);
    if (!failure_ && (r == nullptr || r->values.size() != 1 || r->values[0] != expected))
      failure_ = fmt::format("vCPU {} result {}: expected {}", vcpu, key, expected);
    return *this;
  }
  Expect& guest_cases_passed(unsigned vcpu, std::size_t count) {
    const auto& cases = run_.vcpus.at(vcpu).cases;
    if (failure_) return *this;
    if (cases.size() != count) failure_ = fmt::format("vCPU {}: {} guest cases ran, expected {}", vcpu, cases.size(), count);
    for (const auto& c : cases)
      if (!failure_ && !(c.ended && c.passed)) failure_ = fmt::format("guest case {} did not pass", c.name);
    return *this;
  }
  Expect& reason_contains(const std::string& text) {
    if (!failure_ && run_.reason.find(text) == std::string::npos)
      failure_ = fmt::format("expected the report to mention '{}', got: {}", text, run_.reason);
    return *this;
  }
  Expect& that(bool condition, std::string why) {
    if (!failure_ && !condition) failure_ = std::move(why);
    return *this;
  }
  Check done() const { return failure_; }

 private:
  const machine::RunResult& run_;
  Check failure_;
};

}  // namespace lockvisor::conformance
