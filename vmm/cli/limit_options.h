// The guest-limit options of the commands that boot a VM (GuestLimits,
// vmm/machine/guest_limits.h): --max-report-bytes, --max-report-messages,
// --max-open-cases, --max-serial-bytes.
#pragma once
#include <CLI/CLI.hpp>

#include "vmm/machine/guest_limits.h"

namespace lockvisor::cli {

void add_limit_options(CLI::App& command, machine::GuestLimits& limits);

}  // namespace lockvisor::cli
