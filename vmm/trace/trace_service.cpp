#include "vmm/trace/trace_service.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "lockvisor/abi/boot_info.h"
#include "lockvisor/abi/guest_layout.h"
#include "vmm/devices/exit_kind.h"
#include "vmm/machine/machine_config.h"
#include "vmm/machine/vcpu_runner.h"
#include "vmm/pvlock/pv_backend.h"
#include "vmm/runstate/runstate_page.h"

namespace lockvisor::trace {

std::string sizing_advice(const nlohmann::json& metadata) {
  if (!metadata.contains("sizing")) return {};
  const auto& z = metadata["sizing"];
  const auto events = z.value("max_events", std::uint64_t{0});
  const auto memory = z.value("memory_mib", std::uint64_t{0});
  std::string flags = fmt::format("--trace-max-events {}", events);
  if (memory != 0) flags += fmt::format(" --memory {}", memory);
  const bool too_big = memory > (abi::kMaxMemoryBytes >> 20);
  return fmt::format("trace: lanes filled before the run ended: the worst wait is the worst of what they kept, and "
                     "trace-check does not judge a wait that ended after its lane filled; this run whole needs {}{} "
                     "(docs/trace.md, \"Bounds\")",
                     flags, too_big ? ", more memory than a guest may have: shorten --duration" : "");
}

void TraceService::before_boot(machine::BootContext& boot) {
  using machine::PinPolicy;
  boot_ = &boot;
  Trace& trace = trace_;
  const machine::MachineConfig& cfg = boot.config;
  trace.begin(cfg.vcpus,
              static_cast<std::uint64_t>(
                  std::chrono::duration_cast<std::chrono::nanoseconds>(boot.origin.time_since_epoch()).count()),
              devices::kExitKindNames);
  auto& meta = trace.metadata();
  meta["clock"] = "CLOCK_MONOTONIC; ts = microseconds since the run's origin (before the VM was built)";
  meta["vcpus"] = cfg.vcpus;
  meta["program"] = cfg.program;
  meta["args"] = cfg.args;
  meta["backend"] = std::string(boot.backend.name());
  meta["kvm"] = std::string(boot.kvm_kind);
  meta["tsc_khz"] = boot.tsc_khz;
  meta["runstate"] = std::string(boot.runstate_kind);
  // Which host CPUs each vCPU thread may run on (the affinity set below in
  // run()): who competes with whom for a CPU is half of every picture.
  nlohmann::json cpus = nlohmann::json::array();
  for (unsigned i = 0; i < cfg.vcpus; ++i) {
    if (cfg.pcpus.empty()) {
      cpus.push_back(nullptr);  // unpinned: any allowed CPU
    } else if (cfg.pin == PinPolicy::kSpread) {
      cpus.push_back(nlohmann::json::array({cfg.pcpus[i % cfg.pcpus.size()]}));
    } else {
      cpus.push_back(cfg.pcpus);
    }
  }
  meta["vcpu_host_cpus"] = std::move(cpus);
  // --vnuma: each vCPU's virtual node, what the NUMA locks' bound oracle
  // (numa_bound_check.h) needs to tell a remote bypass from a local one.
  if (cfg.vnuma) meta["vcpu_node"] = cfg.vnuma->vcpu_node;
  // Lock workloads record their acquisitions in guest memory (lock_trace.h),
  // carved from the top of the guest's free memory.
  abi::BootInfo* info = boot.boot_info;
  if (cfg.workload && info != nullptr) {
    free_bytes_ = info->free_end > info->free_start ? info->free_end - info->free_start : 0;
    lock_log_ = place_lock_log(info->free_start, info->free_end, cfg.vcpus, trace.lock_records_per_vcpu());
    if (lock_log_.stride != 0) {
      init_lock_log(boot.memory.all(), lock_log_, cfg.vcpus);
      info->lock_trace_gpa = lock_log_.gpa;
      info->lock_trace_stride = lock_log_.stride;
      info->free_end = lock_log_.gpa;
      info->flags |= abi::kBootFlagLockTrace;
    }
    meta["locks"]["records_per_vcpu"] = lock_log_.capacity;
  } else {
    meta["locks"]["source"] = "none: not a lock workload";
  }
  // The host lanes, one writer each: with a live run-state page and its
  // preemption history, the sampler below drains the history (every
  // preemption exact); with the page alone each vCPU thread reads its own
  // record after every KVM_RUN; without a page the sampler reads schedstat.
  const runstate::RunStatePage* page = boot.runstate_page;
  const bool history = page != nullptr && page->history(0) != nullptr;
  for (auto& v : boot.vcpus) {
    const unsigned i = v->index();
    const bool reads_page = page != nullptr && i < abi::kRunStateMaxVcpus && !history;
    observers_.push_back(std::make_unique<VcpuTraceObserver>(trace.vcpu_lane(i), reads_page ? &trace.host_lane(i) : nullptr,
                                                             reads_page ? &trace.preemptions(i) : nullptr,
                                                             reads_page ? &page->records()[i] : nullptr));
    v->set_observer(observers_.back().get());
  }
  meta["kicks"] = boot.backend.observe_kicks(&trace)
                      ? "flows from the kicker's KICK_CPU to the halt it ended (userspace backend)"
                      : "not visible: this backend's kicks never reach the VMM (KVM delivers KICK_CPU in the kernel)";
  offset_start_ = measure_tsc_offset(boot.vcpus.front()->vcpu_fd());
  for (const auto& v : boot.vcpus) offsets_attr_.push_back(read_tsc_offset_attr(v->vcpu_fd()));
  clock_start_ = sample_clock_pair();
  sampler_.emplace(trace);
}

// After the run: the guest TSC's relation to the trace clock, measured again
// (its change over the run is the error the metadata reports), and the
// guest's lock log turned into slices.
void TraceService::finish() {
  const machine::BootContext& boot = *boot_;
  Trace& trace = trace_;
  auto& meta = trace.metadata();
  const ClockPair end = sample_clock_pair();
  const auto offset_end = measure_tsc_offset(boot.vcpus.front()->vcpu_fd());
  // Each vCPU's offset: KVM's own value after the run when it tells it
  // (exact; each vCPU has its own, and KVM may adjust it while the vCPU runs,
  // e.g. when its thread moves to a CPU whose TSC differs), else vCPU 0's
  // IA32_TSC read. The reads are recorded as an independent check.
  std::vector<std::optional<std::int64_t>> attr_end;
  for (const auto& v : boot.vcpus) attr_end.push_back(read_tsc_offset_attr(v->vcpu_fd()));
  bool attr = true;
  std::int64_t moved = 0;  // the largest change of a vCPU's offset over the run, cycles
  for (std::size_t i = 0; i < attr_end.size(); ++i) {
    attr = attr && attr_end[i] && offsets_attr_[i];
    if (attr) moved = std::max<std::int64_t>(moved, std::abs(*attr_end[i] - *offsets_attr_[i]));
  }
  const std::int64_t read_offset = offset_start_ ? offset_start_->offset : 0;
  std::vector<GuestClock> clocks;
  for (std::size_t i = 0; i < boot.vcpus.size(); ++i)
    clocks.emplace_back(clock_start_, end, attr ? *attr_end[i] : read_offset, boot.tsc_khz);
  const double ns_per_cycle = clocks.front().ns_per_cycle();
  auto& tsc = meta["guest_tsc"];
  tsc["relation"] = "guest TSC = host TSC + offset (no TSC scaling)";
  tsc["ns_per_cycle"] = ns_per_cycle;
  tsc["offset_cycles"] = attr ? *attr_end.front() : read_offset;  // vCPU 0's
  const double pair_ns = static_cast<double>(std::max(clock_start_.bracket_cycles, end.bracket_cycles)) / 2 *
                         ns_per_cycle;
  tsc["host_clock_pair_uncertainty_ns"] = pair_ns;
  if (offset_start_ && offset_end) {
    auto& read = tsc["ia32_tsc_read"];
    read["offset_cycles"] = offset_start_->offset;
    read["offset_cycles_after"] = offset_end->offset;
    read["uncertainty_ns"] =
        static_cast<double>(std::max(offset_start_->bracket_cycles, offset_end->bracket_cycles)) / 2 *
        ns_per_cycle;
    if (attr)
      read["differs_from_offset_ns"] =
          std::abs(static_cast<double>(offset_end->offset - *attr_end.front())) * ns_per_cycle;
  }
  std::optional<double> error_ns;  // a guest timestamp's error on the trace clock; none when unknown
  if (attr) {
    tsc["source"] = "KVM_VCPU_TSC_OFFSET of each vCPU after the run (exact), checked by IA32_TSC reads";
    tsc["offset_moved_ns"] = static_cast<double>(moved) * ns_per_cycle;
    // A guest timestamp's error on the trace clock: the host clock pairs'
    // half-width, plus how far any vCPU's offset moved during the run (a
    // timestamp taken before the move is off by that much).
    error_ns = pair_ns + static_cast<double>(moved) * ns_per_cycle;
  } else if (offset_start_ && offset_end) {
    const double bracket = static_cast<double>(std::max(offset_start_->bracket_cycles, offset_end->bracket_cycles));
    const double drift = std::abs(static_cast<double>(offset_end->offset - read_offset));
    tsc["source"] = "vCPU 0's IA32_TSC reads (KVM_GET_MSRS between two host rdtsc, before and after the run)";
    tsc["offset_moved_ns"] = drift * ns_per_cycle;
    error_ns = pair_ns + std::max(bracket / 2, drift) * ns_per_cycle;
  } else {
    tsc["source"] = "none: KVM told neither the offset nor IA32_TSC; offset assumed 0";
  }
  tsc["error_ns"] = error_ns ? nlohmann::json(*error_ns) : nlohmann::json(nullptr);
  if (boot.config.workload && lock_log_.stride != 0) {
    const std::uint32_t locks = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(boot.config.workload->nlocks, 1, 16));
    // A record the conversion misplaced by no more than its stated error is
    // kept (clamped into the run), not lost.
    const auto slack_ns = static_cast<std::uint64_t>(error_ns.value_or(0));
    const auto stats = read_lock_log(boot.memory.all(), lock_log_, clocks, trace.origin_ns(), end.ns, slack_ns, locks,
                                            trace);
    meta["locks"]["source"] = "guest lock-trace log (no exits), guest TSC converted";
    meta["locks"]["records"] = stats.records;
    meta["locks"]["dropped_in_guest"] = stats.dropped;
    meta["locks"]["rejected"] = stats.rejected;
    meta["locks"]["clamped"] = stats.clamped;
    nlohmann::json by_path = nlohmann::json::object();
    for (unsigned p = 0; p < locks::kAcqPathCount; ++p) by_path[locks::kAcqPathNames[p]] = stats.by_path[p];
    meta["locks"]["by_path"] = std::move(by_path);
    meta["locks"]["invalid_path"] = stats.invalid_path;
  }
  // Lanes that filled: what would have kept this run whole, a quarter more
  // (the next run's luckiest vCPU may make more), for the run's trace line
  // (docs/trace.md, "Bounds").
  if (trace.dropped_events() != 0) {
    const auto round_up = [](std::uint64_t n, std::uint64_t to) { return (n + to - 1) / to * to; };
    nlohmann::json sizing;
    const LaneQuota need = trace.most_needed();
    sizing["max_events"] = round_up(max_events_to_hold(need, trace.vcpus()) / 4 * 5, 1000000);
    const std::uint64_t free_needed = lock_log_free_bytes_for(need.lock_records / 4 * 5, trace.vcpus());
    if (lock_log_.stride != 0 && need.lock_records != 0 && free_needed > free_bytes_)
      sizing["memory_mib"] = round_up(boot.config.memory_mib + round_up(free_needed - free_bytes_, 1 << 20) / (1 << 20), 64);
    meta["sizing"] = std::move(sizing);
  }
}


}  // namespace lockvisor::trace
