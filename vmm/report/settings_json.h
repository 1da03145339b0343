// The `settings` object of every JSON result (run, conformance, bench): the
// host and VMM knobs that decide how a PV lock behaves, in one place, so that
// a result says under which settings it was measured. A new knob adds its
// line here and nowhere else.
#pragma once
#include <nlohmann/json.hpp>

#include "vmm/machine/machine_config.h"

namespace lockvisor::report {

// Reads the KVM module parameters (PLE, halt polling) from sysfs.
nlohmann::json settings_json(const machine::MachineConfig& config);

}  // namespace lockvisor::report
