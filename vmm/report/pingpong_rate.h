// The hand-off rate of a completed pingpong run, from the guest's elapsed_ns
// report (vCPU 0: the time the whole exchange took on the guest clock).
// The guest is untrusted: no report, an empty or multi-valued array, or a
// zero elapsed time gives no rate, and the run becomes a guest fault (exit 3,
// README.md "Exit codes": unusable results), not a completed run.
#pragma once
#include <cstdint>
#include <optional>

#include "vmm/machine/run_result.h"

namespace lockvisor::report {

struct PingpongRate {
  std::uint64_t handoffs = 0;  // rounds per vCPU times vCPUs
  double seconds = 0;          // guest clock
  double us_per_handoff = 0;
};

// `rounds` is the turns each vCPU took (0: the guest's default, 1000). For a
// completed run without a usable report, sets result.outcome to kGuestFault
// and result.reason to one line saying why, and returns nullopt. A run that
// did not complete is left alone (nullopt).
std::optional<PingpongRate> pingpong_rate(machine::RunResult& result, std::uint64_t rounds);

}  // namespace lockvisor::report
