#include "vmm/lab/platform_part.h"

#include <fmt/format.h>

#include <chrono>

#include "vmm/bench/exit_costs.h"
#include "vmm/guest_image.h"
#include "vmm/host/cpu_set.h"
#include "vmm/host/kvm_module_params.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/machine/machine.h"
#include "vmm/machine/run_result.h"
#include "vmm/util/error.h"

namespace lockvisor::lab {
namespace {

// Few batches and rounds: the lab wants the order of magnitude of this
// host's costs in well under a second, not bench's precision.
constexpr std::uint64_t kDoorbellBatches = 50;
constexpr std::uint64_t kKickRounds = 200;
constexpr double kTimeoutS = 30;

nlohmann::json us(const metrics::LatencySummary& ns) {
  return {{"median", ns.p50 / 1000}, {"p99", ns.p99 / 1000}, {"samples", ns.count}};
}

nlohmann::json measure_exits() {
  const auto kvm = kvm::KvmSystem::open();
  std::vector<std::byte> storage;
  const auto image = select_guest_image("", storage);
  const bench::BootFn boot = [&](machine::MachineConfig config) {
    config.echo_guest_prints = false;
    config.timeout_s = kTimeoutS;
    machine::Machine vm(kvm, std::move(config), image, std::chrono::steady_clock::now());
    auto result = vm.run();
    if (result.outcome != machine::Outcome::kCompleted)
      fail_host("{} ({})", machine::outcome_name(result.outcome), result.reason);
    return result;
  };
  nlohmann::json out;
  const auto costs = bench::measure_exit_costs(boot, kDoorbellBatches);
  out["bare_pio_exit_us"] = us(costs.bare_exit_ns);
  out["doorbell_us"] = us(costs.doorbell_ns);
  const auto allowed = host::allowed_cpus();
  out["kick_wake_same_cpu_us"] =
      us(bench::measure_kick_wake(boot, {allowed.front()}, machine::PinPolicy::kSpread, kKickRounds).guest_ns);
  if (allowed.size() >= 2)
    out["kick_wake_apart_us"] =
        us(bench::measure_kick_wake(boot, {allowed[0], allowed[1]}, machine::PinPolicy::kSpread, kKickRounds).guest_ns);
  return out;
}

std::string median_text(const nlohmann::json& exits, const char* key) {
  if (!exits.contains(key)) return "not measured";
  const auto& v = exits.at(key);
  return fmt::format("{:.1f} us (p99 {:.1f} us)", v.value("median", 0.0), v.value("p99", 0.0));
}

}  // namespace

nlohmann::json measure_platform_part() {
  nlohmann::json out;
  try {
    out["exits"] = measure_exits();
  } catch (const std::exception& e) {
    out["exits"] = {{"not_measured", e.what()}};
  }
  const auto pause = host::read_pause_exit_params();
  out["pause_loop_exiting"] = {{"module", pause.module}, {"values", pause.values}};
  const auto halt_poll = host::read_halt_poll_ns();
  out["halt_poll_ns"] = halt_poll ? nlohmann::json(*halt_poll) : nlohmann::json(nullptr);
  return out;
}

std::string platform_part_markdown(const nlohmann::json& p) {
  std::string out = "Measured on this host when the lab started (lab.json, machine.platform):\n\n";
  const auto& exits = p.value("exits", nlohmann::json::object());
  if (exits.contains("not_measured")) {
    out += fmt::format("- Exit costs: not measured ({})\n", exits.at("not_measured").get<std::string>());
  } else {
    out += fmt::format("- A bare exit from the guest to the VMM and back (port I/O): {}\n",
                       median_text(exits, "bare_pio_exit_us"));
    out += fmt::format("- The doorbell hypercall (how a PV lock halts or kicks here): {}\n",
                       median_text(exits, "doorbell_us"));
    out += fmt::format("- Kick to wake, both vCPUs on one host CPU: {}; on two host CPUs: {}\n",
                       median_text(exits, "kick_wake_same_cpu_us"), median_text(exits, "kick_wake_apart_us"));
  }
  const auto& ple = p.value("pause_loop_exiting", nlohmann::json::object());
  const auto module = ple.value("module", std::string("none"));
  bool ple_on = false;
  std::string values;
  const auto ple_values = ple.value("values", nlohmann::json::object());
  for (const auto& item : ple_values.items()) {
    const auto& name = item.key();
    const auto& value = item.value();
    values += fmt::format("{}{}={}", values.empty() ? "" : ", ", name, value.dump());
    if ((name == "ple_gap" || name == "pause_filter_count") && value.is_number() && value.get<double>() > 0)
      ple_on = true;
  }
  if (module == "none")
    out += "- Pause-loop exiting: absent (neither kvm_intel nor kvm_amd is loaded): a vCPU spinning on a lock whose "
           "holder is descheduled keeps its host CPU until the host scheduler takes it away\n";
  else
    out += fmt::format("- Pause-loop exiting: {} ({}: {}): a long spin exits to KVM, which may yield to another "
                       "vCPU\n",
                       ple_on ? "present" : "switched off", module, values.empty() ? "no parameters read" : values);
  if (p.contains("halt_poll_ns") && p.at("halt_poll_ns").is_number())
    out += fmt::format("- kvm halt_poll_ns: {} (applies to the in-kernel backend; the userspace backend has "
                       "--halt-poll-us)\n",
                       p.at("halt_poll_ns").get<std::int64_t>());
  else
    out += "- kvm halt_poll_ns: unknown\n";
  return out;
}

}  // namespace lockvisor::lab
