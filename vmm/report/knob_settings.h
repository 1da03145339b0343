// The userspace backend's host knobs as JSON: halt polling, directed yield,
// boosts, steal time. One function, so that it can move into the run's
// "settings" object as a whole.
#pragma once
#include <nlohmann/json.hpp>

#include "vmm/machine/machine_config.h"

namespace lockvisor::report {

// {"halt_poll": "adaptive:200", "kick_yield": false, "kick_boost": false,
//  "boost": "fifo", "boost_bound_us": 4000, "steal_time": true}
nlohmann::json knob_settings_json(const machine::MachineConfig& config);

}  // namespace lockvisor::report
