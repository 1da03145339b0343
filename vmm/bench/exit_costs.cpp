#include "vmm/bench/exit_costs.h"

#include <fmt/format.h>

#include <algorithm>

#include "vmm/report/run_report.h"
#include "vmm/util/error.h"

namespace lockvisor::bench {
std::uint64_t tsc_cycles_to_ns(std::uint64_t cycles, std::uint64_t tsc_khz) {
  const unsigned __int128 ns = static_cast<unsigned __int128>(cycles) * 1000000 / tsc_khz;
  return ns > ~std::uint64_t{0} ? ~std::uint64_t{0} : static_cast<std::uint64_t>(ns);
}

std::vector<std::uint64_t> cycles_to_ns(const machine::RunResult& run, const char* key) {
  const auto* r = run.result(0, key);
  if (r == nullptr || r->values.empty()) fail_guest("benchmark run: the guest reported no '{}' samples", key);
  if (run.tsc_khz == 0) fail_host("benchmark run: the TSC frequency is unknown");
  std::vector<std::uint64_t> ns;
  ns.reserve(r->values.size());
  for (auto c : r->values) ns.push_back(tsc_cycles_to_ns(c, run.tsc_khz));
  return ns;
}

ExitCosts measure_exit_costs(const BootFn& boot, std::uint64_t batches) {
  machine::MachineConfig config;
  config.vcpus = 1;
  config.program = "bench-doorbell";
  if (batches) config.args = fmt::format("batches={}", batches);
  const auto run = boot(config);
  return {metrics::summarize_latency(cycles_to_ns(run, "bare_exit_cycles")),
          metrics::summarize_latency(cycles_to_ns(run, "doorbell_cycles"))};
}

KickWake measure_kick_wake(const BootFn& boot, const std::vector<int>& pcpus, machine::PinPolicy pin,
                           std::uint64_t rounds) {
  machine::MachineConfig config;
  config.vcpus = 2;
  config.program = "kick-wake";
  config.args = fmt::format("rounds={}", std::clamp<std::uint64_t>(rounds, 1, 4096));
  config.pcpus = pcpus;
  config.pin = pin;
  const auto run = boot(config);
  return {metrics::summarize_latency(cycles_to_ns(run, "kick_wake_cycles")), report::wake_latency_json(run)};
}

}  // namespace lockvisor::bench
