#include "vmm/report/knob_settings.h"

namespace lockvisor::report {

nlohmann::json knob_settings_json(const machine::MachineConfig& config) {
  const pvlock::BackendOptions& b = config.backend;
  return {{"halt_poll", pvlock::format_halt_poll(b.halt_poll)},
          {"kick_yield", b.kick_yield},
          {"kick_boost", b.kick_boost},
          {"boost", pvlock::boost_mechanism_name(b.boost)},
          {"boost_bound_us", b.boost_bound_us},
          {"steal_time", config.steal_time}};
}

}  // namespace lockvisor::report
