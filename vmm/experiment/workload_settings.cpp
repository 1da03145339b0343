#include "vmm/experiment/workload_settings.h"

#include <fmt/format.h>

#include "workloads/workloads.h"
#include "vmm/experiment/lock_name.h"
#include "vmm/experiment/run_settings.h"
#include "vmm/util/error.h"

namespace lockvisor::experiment {

bool is_lock_workload(const std::string& w) { return w == "lockbench" || w == "uncontended" || w == "torture"; }

abi::WorkloadKind workload_kind(const std::string& w) {
  if (w == "uncontended") return abi::WorkloadKind::kUncontended;
  if (w == "torture") return abi::WorkloadKind::kTorture;
  return abi::WorkloadKind::kLockbench;
}

void validate(const WorkloadSettings& w) {
  known_lock(w.lock);
  if (w.layout != "standalone" && w.layout != "embedded") fail("--layout '{}': standalone or embedded", w.layout);
  if (const RunSetting& d = *find_run_setting("duration_s"); !(w.duration_s >= d.min_s && w.duration_s <= d.max_s))
    fail("--duration {}: must be {}", w.duration_s, range_text(d));
  // Every numeric field against the rows the guest checks, named by its option.
  const abi::WorkloadParams p = workload_params(w, 1, 1);
  if (const abi::WorkloadLimit* l = abi::out_of_range(p)) {
    const RunSetting* row = find_run_setting_by_limit(*l);
    fail("{} {}: must be {}..{}", row ? row->flag : l->name, p.*(l->field), l->min, l->max);
  }
}

abi::WorkloadParams workload_params(const WorkloadSettings& w, std::uint64_t seed, unsigned cpus) {
  const auto kind = workload_kind(w.workload);
  const bool torture = kind == abi::WorkloadKind::kTorture;
  abi::WorkloadParams p{};
  p.kind = kind;
  p.cs_ns = w.cs_ns;
  p.cs_lines = w.cs_lines;
  p.delay_ns = w.delay_ns;
  p.duration_ns = static_cast<std::uint64_t>(w.duration_s * 1e9);
  p.iterations = w.iterations ? w.iterations : (kind == abi::WorkloadKind::kUncontended ? kUncontendedIterations : 0);
  p.layout = w.layout == "embedded" ? abi::LockLayout::kEmbedded : abi::LockLayout::kStandalone;
  p.seed = seed;
  p.nlocks = w.locks.value_or(torture ? kTortureLocks : 1);
  if (p.nlocks == 0) p.nlocks = torture ? kTortureLocks : 1;  // 0 locks cannot run: "the default"
  p.long_hold_ns = w.long_hold_ns;
  p.long_hold_every = w.long_hold_every.value_or(torture ? kTortureLongHoldEvery : 0);
  p.cpus = cpus;
  p.fairness_window_ns = workloads::default_fairness_window_ns(p.duration_ns, p.iterations);
  p.wait_halt_delay_ns = w.wait_halt_delay_ns;
  if (!abi::set_lock_name(p, w.lock.c_str())) fail("--lock '{}': name too long", w.lock);
  return p;
}

nlohmann::json params_json(const abi::WorkloadParams& p) {
  return {{"cs_ns", p.cs_ns},
          {"cs_lines", p.cs_lines},
          {"delay_ns", p.delay_ns},
          {"duration_ns", p.duration_ns},
          {"iterations", p.iterations},
          {"layout", p.layout == abi::LockLayout::kEmbedded ? "embedded" : "standalone"},
          {"seed", p.seed},
          {"locks", p.nlocks},
          {"long_hold_ns", p.long_hold_ns},
          {"long_hold_every", p.long_hold_every},
          {"fairness_window_ns", p.fairness_window_ns},
          {"wait_halt_delay_ns", p.wait_halt_delay_ns}};
}

std::string guest_args(const WorkloadSettings& w, const abi::WorkloadParams& p) {
  return fmt::format("lock={} cs={} cs_lines={} delay={} duration_ms={} iterations={} layout={} locks={} "
                     "long_hold_ns={} long_hold_every={}",
                     w.lock, p.cs_ns, p.cs_lines, p.delay_ns, p.duration_ns / 1000000, p.iterations,
                     p.layout == abi::LockLayout::kEmbedded ? "embedded" : "standalone", p.nlocks, p.long_hold_ns,
                     p.long_hold_every);
}

}  // namespace lockvisor::experiment
