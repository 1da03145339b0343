// KVM's own counts for a whole run: the binary statistics of every vCPU
// (KVM_GET_STATS_FD) summed. They are the only place where work that never
// reaches the VMM shows: with the in-kernel irqchip a Linux guest's halts,
// KICK_CPU hypercalls and directed yields stay inside KVM.
#pragma once
#include <cstdint>
#include <span>

#include <nlohmann/json.hpp>

#include "vmm/machine/run_result.h"

namespace lockvisor::report {

// The statistics reported, in this order, as `kvm_totals` of the JSON report.
std::span<const char* const> kvm_total_names();

// The sum of one statistic over the vCPUs (0 where a vCPU lacks it).
std::uint64_t kvm_stat_sum(const machine::RunResult& result, const char* name);

// {halt_exits, halt_wakeup, hypercalls, ...}; null when no vCPU had binary
// statistics (a KVM without KVM_GET_STATS_FD): "not measured", not zero.
nlohmann::json kvm_totals_json(const machine::RunResult& result);

}  // namespace lockvisor::report
