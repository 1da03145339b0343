#include "vmm/lockstat/wake_check.h"

#include <algorithm>

#include <fmt/format.h>

#include "vmm/lockstat/lock_metrics.h"
#include "vmm/lockstat/saturating.h"

namespace lockvisor::lockstat {
namespace {

std::optional<std::uint64_t> kvm_stat(const machine::VcpuReport& v, const char* name) {
  if (const auto it = v.kvm.find(name); it != v.kvm.end()) return it->second;
  return std::nullopt;
}

void add_optional(std::optional<std::uint64_t>& total, const std::optional<std::uint64_t>& value) {
  if (value) add_to(total, *value);
}

nlohmann::json value_or_null(const auto& value) { return value ? nlohmann::json(*value) : nlohmann::json(nullptr); }

nlohmann::json vcpu_json(const WakeVcpu& v) {
  return {{"interrupts", v.interrupts},
          {"woken", v.woken},
          {"spurious", v.spurious},
          {"halts_skipped", v.halts_skipped},
          {"handler_ns", v.handler_ns},
          {"handler_max_ns", v.handler_max_ns},
          {"kvm", {{"irq_injections", value_or_null(v.kvm_irq_injections)},
                   {"nmi_injections", value_or_null(v.kvm_nmi_injections)},
                   {"hypercalls", value_or_null(v.kvm_hypercalls)},
                   {"halt_exits", value_or_null(v.kvm_halt_exits)},
                   {"halt_wakeup", value_or_null(v.kvm_halt_wakeup)}}},
          {"agrees", value_or_null(v.agrees)},
          {"within", value_or_null(v.within)}};
}

}  // namespace

WakeCheck check_wake(abi::PvWake mechanism, const std::vector<abi::WorkloadStats>& stats,
                     const machine::RunResult& run) {
  WakeCheck c;
  c.mechanism = mechanism;
  bool all_known = !stats.empty();
  bool all_agree = true, all_within = true;
  for (std::size_t i = 0; i < stats.size(); ++i) {
    const abi::WorkloadStats& s = stats[i];
    WakeVcpu v;
    v.interrupts = s.wake_interrupts;
    v.woken = s.wake_woken;
    v.spurious = s.wake_spurious;
    v.halts_skipped = s.wake_halts_skipped;
    v.handler_ns = cycles_to_ns(static_cast<double>(s.wake_handler_cycles), s.tsc_khz);
    v.handler_max_ns = cycles_to_ns(static_cast<double>(s.wake_handler_max_cycles), s.tsc_khz);
    if (i < run.vcpus.size()) {
      const auto& r = run.vcpus[i];
      v.kvm_irq_injections = kvm_stat(r, "irq_injections");
      v.kvm_nmi_injections = kvm_stat(r, "nmi_injections");
      v.kvm_hypercalls = kvm_stat(r, "hypercalls");
      v.kvm_halt_exits = kvm_stat(r, "halt_exits");
      v.kvm_halt_wakeup = kvm_stat(r, "halt_wakeup");
    }
    if (v.kvm_irq_injections && v.kvm_nmi_injections) {
      switch (mechanism) {
        case abi::PvWake::kIpi:
          v.agrees = v.interrupts == *v.kvm_irq_injections;
          v.within = v.interrupts <= *v.kvm_irq_injections;
          break;
        case abi::PvWake::kNmi:
          v.agrees = v.interrupts == *v.kvm_nmi_injections;
          v.within = v.interrupts <= *v.kvm_nmi_injections;
          break;
        case abi::PvWake::kHypercall:
          v.agrees = v.within = v.interrupts == 0 && *v.kvm_irq_injections == 0 && *v.kvm_nmi_injections == 0;
          break;
      }
      all_agree = all_agree && *v.agrees;
      all_within = all_within && *v.within;
    } else {
      all_known = false;
    }
    WakeVcpu& t = c.total;
    add_to(t.interrupts, v.interrupts);
    add_to(t.woken, v.woken);
    add_to(t.spurious, v.spurious);
    add_to(t.halts_skipped, v.halts_skipped);
    t.handler_ns += v.handler_ns;
    t.handler_max_ns = std::max(t.handler_max_ns, v.handler_max_ns);
    add_optional(t.kvm_irq_injections, v.kvm_irq_injections);
    add_optional(t.kvm_nmi_injections, v.kvm_nmi_injections);
    add_optional(t.kvm_hypercalls, v.kvm_hypercalls);
    add_optional(t.kvm_halt_exits, v.kvm_halt_exits);
    add_optional(t.kvm_halt_wakeup, v.kvm_halt_wakeup);
    c.vcpus.push_back(v);
  }
  if (all_known) {
    c.total.agrees = all_agree;
    c.total.within = all_within;
  }
  return c;
}

nlohmann::json to_json(const WakeCheck& c) {
  nlohmann::json j = vcpu_json(c.total);
  j["mechanism"] = abi::pv_wake_name(c.mechanism);
  j["handler_mean_ns"] =
      c.total.interrupts > 0 ? nlohmann::json(c.total.handler_ns / static_cast<double>(c.total.interrupts)) : nullptr;
  nlohmann::json per_vcpu = nlohmann::json::array();
  for (const auto& v : c.vcpus) per_vcpu.push_back(vcpu_json(v));
  j["per_vcpu"] = std::move(per_vcpu);
  return j;
}

std::string wake_line(const WakeCheck& c) {
  const WakeVcpu& t = c.total;
  const char* kvm_name = c.mechanism == abi::PvWake::kNmi ? "NMIs" : "interrupts";
  const auto& kvm_count = c.mechanism == abi::PvWake::kNmi ? t.kvm_nmi_injections : t.kvm_irq_injections;
  const std::string agreement = !t.agrees  ? "not checked (no KVM statistics)"
                                : *t.agrees ? "the guest's count agrees"
                                : *t.within ? "KVM counted more than the guest took (a re-injected delivery)"
                                            : "!!! the guest took more than KVM injected";
  const std::string kvm = kvm_count ? fmt::format("KVM injected {} {}", *kvm_count, kvm_name) : "KVM: not measured";
  if (c.mechanism == abi::PvWake::kHypercall)
    return fmt::format("wake-ups (hypercall): KICK_CPU, no wake-up interrupts in the guest; {}, {} NMIs: {}",
                       kvm_count ? fmt::format("KVM injected {} interrupts", *kvm_count) : "KVM: not measured",
                       t.kvm_nmi_injections.value_or(0), agreement);
  return fmt::format("wake-ups ({}): {} handled, {} woke a waiting vCPU ({} before its hlt), {} spurious; handler "
                     "mean {:.0f} ns, longest {:.0f} ns; {}: {}",
                     abi::pv_wake_name(c.mechanism), t.interrupts, t.woken, t.halts_skipped, t.spurious,
                     t.interrupts > 0 ? t.handler_ns / static_cast<double>(t.interrupts) : 0.0, t.handler_max_ns, kvm,
                     agreement);
}

}  // namespace lockvisor::lockstat
