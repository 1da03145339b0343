#include "vmm/lab/metrics.h"

#include "vmm/util/error.h"

namespace lockvisor::lab {
namespace {

// clang-format off
constexpr Metric kMetrics[] = {
  {"ops_per_sec",     "/ops_per_sec",        nullptr,      1,    "acquisitions/s",           true, false},
  {"jain",            "/fairness/jain",      nullptr,      1,    "Jain index over per-CPU ops", true, false},
  {"cv",              "/fairness/cv",        nullptr,      1,    "cv of per-CPU ops",        false, false},
  {"latency_p50_ns",  "/latency_ns/p50",     nullptr,      1,    "ns",                       false, false},
  {"latency_p99_ns",  "/latency_ns/p99",     nullptr,      1,    "ns",                       false, false},
  {"latency_p999_ns", "/latency_ns/p999",    nullptr,      1,    "ns",                       false, false},
  {"latency_max_ns",  "/latency_ns/max",     nullptr,      1,    "ns",                       false, false},
  {"latency_p999_slices", "/latency_ns/p999", nullptr,    1,    "host time slices (lab.json machine.host_slice)", false, true},
  {"latency_max_slices", "/latency_ns/max",  nullptr,      1,    "host time slices (lab.json machine.host_slice)", false, true},
  {"cpu_s",           "/cpu_seconds",        nullptr,      1,    "host CPU s of the vCPU threads (side by side: each guest's share)", false, false},
  {"cpu_s_per_mop",   "/cpu_seconds",        "/ops_total", 1e6,  "CPU s per 10^6 acquisitions", false, false},
  {"vmm_exits_per_acq", "/vmm/exits",       "/ops_total", 1,    "exits to the VMM per acquisition, whole run (no window figure)", false, false},
  {"cpu_s_per_mop_window", "/cpu_seconds_window", "/ops_total", 1e6, "CPU s per 10^6 acquisitions, measured window only", false, false},
  {"window_jain_median", "/window_fairness/jain_median", nullptr, 1, "median Jain over short windows", true, false},
  {"window_jain_min", "/window_fairness/jain_min", nullptr, 1,  "worst Jain over short windows", true, false},
  {"starved_windows", "/window_fairness/starved_windows", nullptr, 1, "short windows where some CPU made no progress", false, false},
  // Readings of an undefined "fairness factor" (metrics/summary.h), over per-CPU rates.
  {"min_over_max",    "/fairness/min_over_max", nullptr, 1,   "slowest / busiest per-CPU rate", true, false, true},
  {"mean_over_max",   "/fairness/mean_over_max", nullptr, 1,  "mean / busiest per-CPU rate", true, false, true},
  {"slowest_half_share", "/fairness/slowest_half_share", nullptr, 1, "the slowest half of the CPUs' share of the work (0.5 = even)", true, false, true},
  // Lock behaviour, from the guest's counts (docs/vnuma.md, docs/confer.md).
  {"handoff_locality", "/handoff_locality", nullptr,       1,    "share of handoffs between two vCPUs that stayed within a virtual node", true, false, true},
  {"steal_fraction",  "/steal_fraction",     nullptr,      1,    "share of acquisitions that bypassed a queued waiter", false, false, true},
  {"confers",         "/pv/pv_confer",       nullptr,      1,    "waiters' confers (YIELD_TO) to a preempted holder", false, false, true},
  {"steal_ms",        "/steal_ns",           nullptr,      1e-6, "ms runnable but not running", false, false},
  {"halts",           "/vmm/halts",          nullptr,      1,    "PV halts (VMM)",           false, false},
  {"kicks",           "/vmm/kicks",          nullptr,      1,    "PV kicks (VMM)",           false, false},
  {"kicks_dropped",   "/vmm/kicks_dropped",  nullptr,      1,    "lossy kicks dropped (VMM)", false, false},
  // KVM's own counts (binary statistics): a Linux guest's halts and KICK_CPU
  // hypercalls stay in KVM, so these are its halts and kicks.
  {"kvm_halt_exits",  "/kvm_totals/halt_exits", nullptr,   1,    "halt exits (KVM)",         false, false, true},
  {"kvm_hypercalls",  "/kvm_totals/hypercalls", nullptr,   1,    "hypercalls (KVM): KICK_CPU and other PV calls", false, false, true},
  {"kvm_directed_yields", "/kvm_totals/directed_yield_attempted", nullptr, 1, "directed yields attempted (KVM)", false, false, true},
  {"kvm_irq_injections", "/kvm_totals/irq_injections", nullptr, 1, "interrupts injected (KVM)", false, false, true},
  {"kvm_nmi_injections", "/kvm_totals/nmi_injections", nullptr, 1, "NMIs injected (KVM)", false, false, true},
  // The guest's wake-up handlers (--pv-wake ipi|nmi; lockstat/wake_check.h), whole run.
  {"wake_woken",      "/wake/woken",         nullptr,      1,    "wake-up interrupts that found their vCPU waiting", false, false, true},
  {"wake_spurious",   "/wake/spurious",      nullptr,      1,    "wake-up interrupts that found their vCPU not waiting", false, false, true},
  {"wake_handler_max_ns", "/wake/handler_max_ns", nullptr, 1,    "longest wake-up handler, ns", false, false, true},
};
// clang-format on

double number_at(const nlohmann::json& report, const char* pointer, const std::string& id, bool& null,
                 bool may_be_absent = false) {
  const nlohmann::json::json_pointer ptr(pointer);
  // A parent that is null (e.g. "vmm" of a native run) makes the metric n/a.
  for (auto parent = ptr.parent_pointer(); !parent.empty(); parent = parent.parent_pointer())
    if (report.contains(parent) && report.at(parent).is_null()) {
      null = true;
      return 0;
    }
  if (!report.contains(ptr) && may_be_absent) {
    null = true;
    return 0;
  }
  if (!report.contains(ptr)) fail("point {}: its run report has no '{}' (was the metric renamed?)", id, pointer);
  const auto& v = report.at(ptr);
  if (v.is_null()) {
    null = true;
    return 0;
  }
  if (!v.is_number()) fail("point {}: '{}' in its run report is not a number", id, pointer);
  // Every figure is a count, a rate, a time or a share.
  if (v.get<double>() < 0) fail("point {}: '{}' in its run report is negative ({})", id, pointer, v.dump());
  return v.get<double>();
}

}  // namespace

std::span<const Metric> metrics() { return kMetrics; }

const Metric* find_metric(const std::string& name) {
  for (const auto& m : kMetrics)
    if (name == m.name) return &m;
  return nullptr;
}

std::optional<double> read_metric(const Metric& m, const nlohmann::json& report, const std::string& id,
                                  std::optional<double> host_slice_ns) {
  bool null = false;
  double value = number_at(report, m.pointer, id, null, m.may_be_absent);
  if (m.per != nullptr) {
    const double per = number_at(report, m.per, id, null);
    if (per == 0) return std::nullopt;
    value /= per;
  }
  if (null) return std::nullopt;
  if (m.in_host_slices) {
    if (!host_slice_ns || *host_slice_ns <= 0) return std::nullopt;
    value /= *host_slice_ns;
  }
  return value * m.scale;
}

}  // namespace lockvisor::lab
