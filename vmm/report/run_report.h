// How a run is shown: a per-vCPU table for people, JSON for tools.
#pragma once
#include <cstddef>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "vmm/machine/machine_config.h"
#include "vmm/machine/run_result.h"
#include "vmm/util/output_file.h"

namespace lockvisor::report {

// Beyond a screen of vCPUs (or native threads) the text reports summarise
// each per-vCPU figure; the JSON keeps every vCPU.
inline constexpr std::size_t kTableVcpus = 32;

void print_run_table(const machine::RunResult& result, std::FILE* out);
nlohmann::json run_to_json(const machine::RunResult& result, const machine::MachineConfig& config);
// Writes JSON to `out` atomically and safely (vmm/util/output_file.h); throws
// lockvisor::Error. Commands create the OutputFile before the run, so that a
// bad --json path fails before anything boots.
void write_json_file(const OutputFile& out, const nlohmann::json& json);
void write_json_file(const std::string& path, const nlohmann::json& json);
// Kick->wake latency of all vCPUs together, summarised (ns).
nlohmann::json wake_latency_json(const machine::RunResult& result);

}  // namespace lockvisor::report
