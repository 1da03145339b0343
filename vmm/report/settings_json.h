// The `settings` object of every JSON result (run, conformance, bench): the
// host and VMM knobs that decide how a PV lock behaves, in one place, so that
// a result says under which settings it was measured. A new knob adds its
// line here and nowhere else.
#pragma once
#include <nlohmann/json.hpp>

#include <vector>

#include "vmm/machine/machine_config.h"
#include "vmm/machine/run_result.h"

namespace lockvisor::report {

// Reads the KVM module parameters (PLE, halt polling) from sysfs.
// `kick_mode_changes`: --kick switches made while the VM ran (control
// socket); listed as "kick_mode_changes" when there were any ("kick" stays
// the mode the run started with).
nlohmann::json settings_json(const machine::MachineConfig& config,
                             const std::vector<machine::KickModeChange>& kick_mode_changes = {});

}  // namespace lockvisor::report
