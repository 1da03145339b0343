#include "vmm/report/pingpong_rate.h"

#include <fmt/format.h>

namespace lockvisor::report {

std::optional<PingpongRate> pingpong_rate(machine::RunResult& result, std::uint64_t rounds) {
  if (result.outcome != machine::Outcome::kCompleted) return std::nullopt;
  const auto unusable = [&](std::string why) -> std::optional<PingpongRate> {
    result.outcome = machine::Outcome::kGuestFault;
    result.reason = "pingpong: " + why + ": no hand-off rate";
    return std::nullopt;
  };
  const auto* elapsed = result.result(0, "elapsed_ns");
  if (elapsed == nullptr) return unusable("the guest reported no elapsed_ns");
  if (elapsed->values.size() != 1)
    return unusable(fmt::format("the guest's elapsed_ns report has {} values, not 1", elapsed->values.size()));
  if (elapsed->values[0] == 0) return unusable("the guest's elapsed_ns is 0");
  PingpongRate rate;
  rate.handoffs = (rounds ? rounds : 1000) * result.vcpus.size();
  rate.seconds = static_cast<double>(elapsed->values[0]) * 1e-9;
  rate.us_per_handoff = rate.handoffs ? rate.seconds * 1e6 / static_cast<double>(rate.handoffs) : 0;
  return rate;
}

}  // namespace lockvisor::report
