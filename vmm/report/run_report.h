// How a run is shown: a per-vCPU table for people, JSON for tools.
#pragma once
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "vmm/machine/machine_config.h"
#include "vmm/machine/run_result.h"

namespace lockvisor::report {

void print_run_table(const machine::RunResult& result, std::FILE* out);
nlohmann::json run_to_json(const machine::RunResult& result, const machine::MachineConfig& config);
// Writes JSON to `path` atomically (temporary file + rename); throws lockvisor::Error.
void write_json_file(const std::string& path, const nlohmann::json& json);
// Kick->wake latency of all vCPUs together, summarised (ns).
nlohmann::json wake_latency_json(const machine::RunResult& result);

}  // namespace lockvisor::report
