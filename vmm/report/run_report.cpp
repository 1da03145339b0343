#include "vmm/report/run_report.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "vmm/host/cpu_set.h"
#include "vmm/metrics/summary.h"
#include "vmm/util/error.h"

namespace lockvisor::report {
namespace {

std::uint64_t stat(const std::map<std::string, std::uint64_t>& stats, const char* name) {
  auto it = stats.find(name);
  return it == stats.end() ? 0 : it->second;
}

std::uint64_t total_exits(const machine::VcpuReport& v) {
  std::uint64_t sum = 0;
  for (const auto& [name, count] : v.exits) sum += count;
  return sum;
}

const char* kick_mode_name(pvlock::KickMode mode) { return mode == pvlock::KickMode::kSticky ? "sticky" : "lossy"; }

}  // namespace

nlohmann::json wake_latency_json(const machine::RunResult& result) {
  std::vector<std::uint64_t> all;
  for (const auto& v : result.vcpus) all.insert(all.end(), v.wake_latency_ns.begin(), v.wake_latency_ns.end());
  const auto s = metrics::summarize_latency(std::move(all));
  return {{"count", s.count}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99},
          {"p999", s.p999},   {"max", s.max}, {"mean", s.mean}};
}

void print_run_table(const machine::RunResult& result, std::FILE* out) {
  fmt::print(out, "{:>4} {:>8} {:>6} {:>9} {:>9} {:>6} {:>6} {:>7} {:>7} {:>8} {:>9} {:>7} {:>7} {:>8} {:>8}\n", "vCPU",
             "state", "pCPUs", "halts", "immediate", "woken", "kicks", "kicked", "dropped", "exits", "emulated",
             "preempt", "cpu-s", "invol-cs", "wake-p50");
  for (const auto& v : result.vcpus) {
    const auto wake = metrics::summarize_latency(v.wake_latency_ns);
    const std::string pcpus = host::format_cpu_list(v.affinity);
    fmt::print(out, "{:>4} {:>8} {:>6} {:>9} {:>9} {:>6} {:>6} {:>7} {:>7} {:>8} {:>9} {:>7} {:>7.3f} {:>8} {:>8}\n",
               v.index, machine::vcpu_state_name(v.final_state), pcpus.size() > 6 ? pcpus.substr(0, 5) + "+" : pcpus,
               v.pv.at("halts"), v.pv.at("halts_immediate"), v.pv.at("halts_woken") + v.pv.at("halts_polled"),
               v.pv.at("kicks_sent"), v.pv.at("kicks_received"), v.pv.at("kicks_dropped"), total_exits(v),
               stat(v.kvm, "insn_emulation"), stat(v.kvm, "preemption_reported") + stat(v.kvm, "preemption_other"),
               v.cpu_seconds, v.involuntary_switches,
               wake.count ? fmt::format("{:.1f}us", wake.p50 / 1000.0) : std::string("-"));
  }
  const auto wake = wake_latency_json(result);
  if (wake["count"].get<std::uint64_t>() > 0)
    fmt::print(out, "kick->wake latency (VMM-measured, all vCPUs): median {:.1f} us, p99 {:.1f} us over {} wakes\n",
               wake["p50"].get<double>() / 1000.0, wake["p99"].get<double>() / 1000.0,
               wake["count"].get<std::uint64_t>());
}

nlohmann::json run_to_json(const machine::RunResult& result, const machine::MachineConfig& config) {
  nlohmann::json j;
  j["outcome"] = machine::outcome_name(result.outcome);
  j["exit_code"] = machine::exit_code(result.outcome);
  j["reason"] = result.reason;
  j["details"] = result.details;
  j["wall_seconds"] = result.wall_seconds;
  j["seconds_to_first_entry"] = result.seconds_to_first_entry;
  j["seconds_to_first_exit"] = result.seconds_to_first_exit;
  j["host"] = {{"kvm", result.kvm_kind}, {"tsc_khz", result.tsc_khz}};
  j["config"] = {{"program", config.program},
                 {"args", config.args},
                 {"vcpus", config.vcpus},
                 {"memory_mib", config.memory_mib},
                 {"pcpus", host::format_cpu_list(config.pcpus)},
                 {"pin", config.pin == machine::PinPolicy::kSpread ? "spread" : "float"},
                 {"pv_unhalt", config.pv_unhalt},
                 {"sbi_pvlock", config.sbi_pvlock},
                 {"kick", kick_mode_name(config.backend.mode)},
                 {"kick_delay_us", config.backend.kick_delay_us},
                 {"halt_poll_us", config.backend.halt_poll_us},
                 {"backend", result.backend},
                 {"seed", config.seed}};
  j["wake_latency_ns"] = wake_latency_json(result);
  nlohmann::json vcpus = nlohmann::json::array();
  for (const auto& v : result.vcpus) {
    nlohmann::json jv;
    jv["index"] = v.index;
    jv["apic_id"] = v.apic_id;
    jv["state"] = machine::vcpu_state_name(v.final_state);
    jv["kick_pending"] = v.kick_pending;
    jv["last_hypercall"] = v.last_hypercall;
    jv["rip"] = v.rip;
    jv["affinity"] = host::format_cpu_list(v.affinity);
    if (v.guest_exit_code) jv["guest_exit_code"] = *v.guest_exit_code;
    jv["pv"] = v.pv;
    const auto wake = metrics::summarize_latency(v.wake_latency_ns);
    jv["wake_latency_ns"] = {{"count", wake.count}, {"p50", wake.p50}, {"p99", wake.p99}, {"max", wake.max}};
    jv["exits"] = v.exits;
    jv["kvm_stats"] = v.kvm;
    jv["cpu_seconds"] = v.cpu_seconds;
    jv["runqueue_wait_ns"] = v.runqueue_wait_ns ? nlohmann::json(*v.runqueue_wait_ns) : nlohmann::json(nullptr);
    jv["voluntary_context_switches"] = v.voluntary_switches;
    jv["involuntary_context_switches"] = v.involuntary_switches;
    nlohmann::json results = nlohmann::json::object();
    for (const auto& r : v.results) {
      if (r.values.size() == 1)
        results[r.key] = r.values[0];
      else
        results[r.key] = r.values;
    }
    jv["results"] = results;
    nlohmann::json cases = nlohmann::json::array();
    for (const auto& c : v.cases) cases.push_back({{"name", c.name}, {"passed", c.passed && c.ended}});
    jv["cases"] = cases;
    vcpus.push_back(std::move(jv));
  }
  j["vcpus"] = std::move(vcpus);
  j["guest_prints"] = result.guest_prints;
  return j;
}

void write_json_file(const std::string& path, const nlohmann::json& json) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    if (!out) fail("--json {}: cannot write: {}", path, std::strerror(errno));
    out << json.dump(2) << '\n';
    if (!out.flush()) fail("--json {}: write failed: {}", path, std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) fail("--json {}: {}", path, ec.message());
}

}  // namespace lockvisor::report
