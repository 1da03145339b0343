#include "vmm/report/run_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "vmm/arch/arch_name.h"
#include "vmm/host/cpu_set.h"
#include "vmm/host/emulation.h"
#include "vmm/util/guest_text.h"
#include "vmm/metrics/summary.h"
#include "vmm/report/settings_json.h"
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

using pvlock::kick_mode_name;

// nlohmann::json's dump() throws on invalid UTF-8 (type_error.316): every
// string that did not originate in the VMM goes through this. Guest strings
// were already made valid when they arrived (report_channel.cpp), so this
// only catches what comes from elsewhere (--param, paths in reasons).
std::string utf8(std::string_view text, bool* replaced) { return lockvisor::valid_utf8(text, replaced); }

std::vector<std::string> utf8(const std::vector<std::string>& lines, bool* replaced) {
  std::vector<std::string> out;
  out.reserve(lines.size());
  for (const auto& line : lines) out.push_back(lockvisor::valid_utf8(line, replaced));
  return out;
}

nlohmann::json pv_counts_json(const pvlock::PvCounts& counts) {
  nlohmann::json j = nlohmann::json::object();
  const auto values = counts.values();
  for (std::size_t i = 0; i < pvlock::kPvCounterCount; ++i) j[pvlock::kPvCounterNames[i]] = values[i];
  return j;
}

// Halt polling, yields, boosts and steal time, when any of them happened.
void print_knob_lines(const machine::RunResult& result, std::FILE* out) {
  pvlock::PvCounts sum;
  for (const auto& v : result.vcpus) sum += v.pv;
  if (sum.halts_polled + sum.halt_polls_failed > 0)
    fmt::print(out, "halt polling: {} polls caught the kick, {} slept after polling, {:.3f} CPU-s spent polling\n",
               sum.halts_polled, sum.halt_polls_failed, static_cast<double>(sum.halt_poll_ns) / 1e9);
  if (sum.kick_yields + sum.yield_to_calls + sum.boosts > 0)
    fmt::print(out, "yields: {} after kicks; YIELD_TO: {} calls; boosts: {} ({} ended by the time bound)\n",
               sum.kick_yields, sum.yield_to_calls, sum.boosts, sum.boosts_expired);
  bool any_steal = false;
  for (const auto& v : result.vcpus) any_steal = any_steal || v.steal_time_ns.has_value();
  if (any_steal && result.vcpus.size() > kTableVcpus) {
    double steal_ns = 0, wait_ns = 0;
    for (const auto& v : result.vcpus) {
      steal_ns += static_cast<double>(v.steal_time_ns.value_or(0));
      wait_ns += static_cast<double>(v.runqueue_wait_ns.value_or(0));
    }
    fmt::print(out, "steal time (guest record / host runqueue wait, ms), all vCPUs: {:.1f}/{:.1f}\n", steal_ns / 1e6,
               wait_ns / 1e6);
  } else if (any_steal) {
    fmt::print(out, "steal time (guest record / host runqueue wait, ms):");
    for (const auto& v : result.vcpus)
      fmt::print(out, " {}:{}/{}", v.index, v.steal_time_ns ? fmt::format("{:.1f}", *v.steal_time_ns / 1e6) : "-",
                 v.runqueue_wait_ns ? fmt::format("{:.1f}", *v.runqueue_wait_ns / 1e6) : "-");
    fmt::print(out, "\n");
  }
}

// VcpuReport::injected as JSON: {"holder": {"count", "ns", "guest_count",
// "guest_events", "events"}, ...}; guest fields only for targeted kinds.
nlohmann::json injected_json(const std::map<std::string, machine::InjectedKindCounts>& injected) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [kind, c] : injected) {
    nlohmann::json k = {{"count", c.count}, {"ns", c.ns}};
    if (c.guest_count || c.guest_events || !c.event_indices.empty()) {
      k["guest_count"] = c.guest_count ? nlohmann::json(*c.guest_count) : nlohmann::json(nullptr);
      k["guest_events"] = c.guest_events ? nlohmann::json(*c.guest_events) : nlohmann::json(nullptr);
      k["events"] = c.event_indices;
    }
    j[kind] = std::move(k);
  }
  return j;
}

// One line per vCPU that had injections: "vCPU 1: holder 12 (guest 12 of 48 events), periodic 10, 10.0 ms parked".
void print_injected_lines(const machine::RunResult& result, std::FILE* out) {
  bool header = false;
  for (const auto& v : result.vcpus) {
    if (v.injected.empty()) continue;
    if (!std::exchange(header, true)) fmt::print(out, "injected preemptions (--inject), per vCPU and kind:\n");
    std::string line;
    for (const auto& [kind, c] : v.injected) {
      line += fmt::format("{}{} {}", line.empty() ? "" : ", ", kind, c.count);
      if (c.guest_count)
        line += fmt::format(" (guest {} of {} events)", *c.guest_count, c.guest_events ? *c.guest_events : 0);
    }
    fmt::print(out, "  vCPU {}: {}; parked {} times, {:.1f} ms\n", v.index, line, v.park.parks,
               static_cast<double>(v.park.parked_ns) / 1e6);
  }
}

}  // namespace

nlohmann::json wake_latency_json(const machine::RunResult& result) {
  std::vector<std::uint64_t> all;
  for (const auto& v : result.vcpus) all.insert(all.end(), v.wake_latency_ns.begin(), v.wake_latency_ns.end());
  const auto s = metrics::summarize_latency(std::move(all));
  return {{"count", s.count}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99},
          {"p999", s.p999},   {"max", s.max}, {"mean", s.mean}};
}

namespace {

void print_vcpu_rows(const machine::RunResult& result, std::FILE* out) {
  fmt::print(out, "{:>4} {:>8} {:>6} {:>9} {:>9} {:>6} {:>6} {:>7} {:>7} {:>8} {:>9} {:>7} {:>7} {:>8} {:>8}\n", "vCPU",
             "state", "pCPUs", "halts", "immediate", "woken", "kicks", "kicked", "dropped", "exits", "emulated",
             "preempt", "cpu-s", "invol-cs", "wake-p50");
  for (const auto& v : result.vcpus) {
    const auto wake = metrics::summarize_latency(v.wake_latency_ns);
    const std::string pcpus = host::format_cpu_list(v.affinity);
    fmt::print(out, "{:>4} {:>8} {:>6} {:>9} {:>9} {:>6} {:>6} {:>7} {:>7} {:>8} {:>9} {:>7} {:>7.3f} {:>8} {:>8}\n",
               v.index, machine::vcpu_state_name(v.final_state), pcpus.size() > 6 ? pcpus.substr(0, 5) + "+" : pcpus,
               v.pv.halts, v.pv.halts_immediate, v.pv.halts_woken + v.pv.halts_polled, v.pv.kicks_sent,
               v.pv.kicks_received, v.pv.kicks_dropped, total_exits(v),
               stat(v.kvm, "insn_emulation"), stat(v.kvm, "preemption_reported") + stat(v.kvm, "preemption_other"),
               v.cpu_seconds, v.involuntary_switches,
               wake.count ? fmt::format("{:.1f}us", wake.p50 / 1000.0) : std::string("-"));
  }
}

void print_runstate_lines(const machine::RunResult& result, std::FILE* out) {
  if (result.runstate == "bpf") {
    fmt::print(out, "run-state page: bpf ({}); per vCPU: page preemptions / involuntary switches while registered, sleeps\n",
               result.runstate_detail);
    if (result.vcpus.size() > kTableVcpus) {
      machine::VcpuRunStateCounts sum{};
      unsigned registered = 0;
      for (const auto& v : result.vcpus) {
        if (!v.runstate) continue;
        ++registered;
        sum.preemptions += v.runstate->preemptions;
        sum.involuntary_switches += v.runstate->involuntary_switches;
        sum.sleeps += v.runstate->sleeps;
        sum.anomalies += v.runstate->anomalies;
      }
      fmt::print(out, "  all {} registered vCPUs: {} / {}, {} sleeps, {} missed switches\n", registered,
                 sum.preemptions, sum.involuntary_switches, sum.sleeps, sum.anomalies);
      return;
    }
    for (const auto& v : result.vcpus)
      if (v.runstate)
        fmt::print(out, "  vCPU {}: {} / {}, {} sleeps{}\n", v.index, v.runstate->preemptions,
                   v.runstate->involuntary_switches, v.runstate->sleeps,
                   v.runstate->anomalies ? fmt::format(", {} missed switches", v.runstate->anomalies) : std::string());
  } else {
    fmt::print(out, "run-state page: unknown ({})\n", result.runstate_detail);
  }
}

// One summarised column: its total, nearest-rank percentiles and extremes.
void print_column_summary(std::FILE* out, const char* name, const std::vector<machine::VcpuReport>& vcpus,
                          double (*value)(const machine::VcpuReport&)) {
  std::vector<std::pair<double, unsigned>> values;
  double sum = 0;
  for (const auto& v : vcpus) {
    values.emplace_back(value(v), v.index);
    sum += values.back().first;
  }
  std::sort(values.begin(), values.end());
  const auto at = [&](double p) { return values[metrics::nearest_rank(values.size(), p) - 1].first; };
  fmt::print(out, "{:>9} {:>12.6g} {:>10.6g} {:>10.6g} {:>10.6g} {:>10.6g}  vCPU {} / vCPU {}\n", name, sum,
             values.front().first, at(50), at(90), values.back().first, values.front().second, values.back().second);
}

void print_run_summary(const machine::RunResult& result, std::FILE* out) {
  std::map<std::string, unsigned> states;
  for (const auto& v : result.vcpus) ++states[machine::vcpu_state_name(v.final_state)];
  std::string state_text;
  for (const auto& [state, n] : states) state_text += fmt::format("{}{} {}", state_text.empty() ? "" : ", ", n, state);
  fmt::print(out, "{} vCPUs ({}); summarised per column, every vCPU is in the JSON (--json):\n", result.vcpus.size(),
             state_text);
  fmt::print(out, "{:>9} {:>12} {:>10} {:>10} {:>10} {:>10}  {}\n", "column", "total", "min", "p50", "p90", "max",
             "least / most");
  using R = const machine::VcpuReport&;
  print_column_summary(out, "halts", result.vcpus, [](R v) { return double(v.pv.halts); });
  print_column_summary(out, "immediate", result.vcpus, [](R v) { return double(v.pv.halts_immediate); });
  print_column_summary(out, "woken", result.vcpus, [](R v) { return double(v.pv.halts_woken + v.pv.halts_polled); });
  print_column_summary(out, "kicks", result.vcpus, [](R v) { return double(v.pv.kicks_sent); });
  print_column_summary(out, "kicked", result.vcpus, [](R v) { return double(v.pv.kicks_received); });
  print_column_summary(out, "dropped", result.vcpus, [](R v) { return double(v.pv.kicks_dropped); });
  print_column_summary(out, "exits", result.vcpus, [](R v) { return double(total_exits(v)); });
  print_column_summary(out, "emulated", result.vcpus, [](R v) { return double(stat(v.kvm, "insn_emulation")); });
  print_column_summary(out, "preempt", result.vcpus, [](R v) {
    return double(stat(v.kvm, "preemption_reported") + stat(v.kvm, "preemption_other"));
  });
  print_column_summary(out, "cpu-s", result.vcpus, [](R v) { return v.cpu_seconds; });
  print_column_summary(out, "invol-cs", result.vcpus, [](R v) { return double(v.involuntary_switches); });
}

}  // namespace

void print_run_table(const machine::RunResult& result, std::FILE* out) {
  if (result.vcpus.size() > kTableVcpus) {
    print_run_summary(result, out);
  } else {
    print_vcpu_rows(result, out);
  }
  print_runstate_lines(result, out);
  print_knob_lines(result, out);
  print_injected_lines(result, out);
  const auto wake = wake_latency_json(result);
  if (wake["count"].get<std::uint64_t>() > 0)
    fmt::print(out, "kick->wake latency (VMM-measured, all vCPUs): median {:.1f} us, p99 {:.1f} us over {} wakes\n",
               wake["p50"].get<double>() / 1000.0, wake["p99"].get<double>() / 1000.0,
               wake["count"].get<std::uint64_t>());
}

nlohmann::json run_to_json(const machine::RunResult& result, const machine::MachineConfig& config) {
  nlohmann::json j;
  bool host_text_replaced = false;  // invalid UTF-8 in text that did not come from the guest
  j["arch"] = arch::kThisArch;
  j["outcome"] = machine::outcome_name(result.outcome);
  j["exit_code"] = machine::exit_code(result.outcome);
  j["reason"] = utf8(result.reason, &host_text_replaced);
  j["details"] = utf8(result.details, &host_text_replaced);
  j["wall_seconds"] = result.wall_seconds;
  j["seconds_to_first_entry"] = result.seconds_to_first_entry;
  j["seconds_to_first_exit"] = result.seconds_to_first_exit;
  // When each build step ended, ms since the run's start (bench's
  // breakdown); runstate_live is off the path to the first entry.
  const auto& m = result.startup;
  j["startup_ms"] = {{"vm", m.vm * 1e3},       {"runstate", m.runstate * 1e3},
                     {"image", m.image * 1e3}, {"vcpus", m.vcpus * 1e3},
                     {"run", m.run * 1e3},     {"first_entry", result.seconds_to_first_entry * 1e3},
                     {"runstate_live", m.runstate_live > 0 ? nlohmann::json(m.runstate_live * 1e3) : nlohmann::json(nullptr)}};
  j["host"] = {{"kvm", result.kvm_kind}, {"tsc_khz", result.tsc_khz}};
  j["host"].update(host::emulation_json(host::emulation()));
  j["settings"] = settings_json(config, result.kick_mode_changes);
  // Doorbell calls the hypercall table had no handler for (answered as KVM/SBI do).
  j["unknown_hypercalls"] = {{"kvm", result.unknown_kvm_hypercalls}, {"sbi", result.unknown_sbi_calls}};
  j["config"] = {{"program", utf8(config.program, &host_text_replaced)},
                 {"args", utf8(config.args, &host_text_replaced)},
                 {"vcpus", config.vcpus},
                 {"memory_mib", config.memory_mib},
                 {"pcpus", host::format_cpu_list(config.pcpus)},
                 {"pin", config.pin == machine::PinPolicy::kSpread ? "spread" : "float"},
                 {"pv_unhalt", config.pv_unhalt},
                 {"sbi_pvlock", config.sbi_pvlock},
                 {"kick", kick_mode_name(config.backend.mode)},
                 {"kick_delay_us", config.backend.kick_delay_us},
                 {"halt_poll_us", config.backend.halt_poll.mode == pvlock::HaltPollMode::kFixed ? config.backend.halt_poll.us : 0},
                 {"backend", result.backend},
                 {"runstate", config.runstate == machine::RunStateMode::kOn    ? "on"
                              : config.runstate == machine::RunStateMode::kOff ? "off"
                                                                               : "auto"},
                 {"seed", config.seed},
                 {"limits",
                  {{"max_report_bytes", config.limits.report_bytes},
                   {"max_report_messages", config.limits.report_messages},
                   {"max_open_cases", config.limits.open_cases},
                   {"max_serial_bytes", config.limits.serial_bytes},
                   {"max_array_values", config.limits.array_values}}}};
  j["runstate"] = result.runstate;  // "bpf": the page was live; "unknown": a zero page
  j["runstate_detail"] = utf8(result.runstate_detail, &host_text_replaced);
  j["guest_usage"] = {{"report_messages", result.guest_usage.report_messages},
                      {"report_bytes", result.guest_usage.report_bytes},
                      {"serial_bytes", result.guest_usage.serial_bytes}};
  j["wake_latency_ns"] = wake_latency_json(result);
  nlohmann::json vcpus = nlohmann::json::array();
  for (const auto& v : result.vcpus) {
    nlohmann::json jv;
    jv["index"] = v.index;
    jv["apic_id"] = v.apic_id;
    jv["state"] = machine::vcpu_state_name(v.final_state);
    jv["kick_pending"] = v.kick_pending;
    jv["last_hypercall"] = v.last_hypercall;
    jv["rip"] = v.exited ? nlohmann::json(v.rip) : nlohmann::json(nullptr);  // null: never exited
    jv["affinity"] = host::format_cpu_list(v.affinity);
    if (v.guest_exit_code) jv["guest_exit_code"] = *v.guest_exit_code;
    jv["pv"] = pv_counts_json(v.pv);
    const auto wake = metrics::summarize_latency(v.wake_latency_ns);
    jv["wake_latency_ns"] = {{"count", wake.count}, {"p50", wake.p50}, {"p99", wake.p99}, {"max", wake.max}};
    jv["exits"] = v.exits;
    jv["kvm_stats"] = v.kvm;
    jv["cpu_seconds"] = v.cpu_seconds;
    jv["runqueue_wait_ns"] = v.runqueue_wait_ns ? nlohmann::json(*v.runqueue_wait_ns) : nlohmann::json(nullptr);
    // The guest's steal-time record (null: not enabled), next to the host's own figure above.
    jv["steal_time_ns"] = v.steal_time_ns ? nlohmann::json(*v.steal_time_ns) : nlohmann::json(nullptr);
    jv["steal_preempted"] = v.steal_preempted;
    jv["voluntary_context_switches"] = v.voluntary_switches;
    jv["involuntary_context_switches"] = v.involuntary_switches;
    if (v.runstate)
      jv["runstate"] = {{"preemptions", v.runstate->preemptions},
                        {"sleeps", v.runstate->sleeps},
                        {"runs", v.runstate->runs},
                        {"anomalies", v.runstate->anomalies},
                        {"involuntary_context_switches", v.runstate->involuntary_switches}};
    else
      jv["runstate"] = nullptr;
    jv["injected_preemptions"] = {{"requested", v.park.requested},
                                  {"count", v.park.parks},
                                  {"ns", v.park.parked_ns},
                                  {"pauses", v.park.pauses},
                                  {"paused_ns", v.park.paused_ns},
                                  {"by_kind", injected_json(v.injected)}};
    nlohmann::json results = nlohmann::json::object();
    bool guest_replaced = false;  // already counted in guest_text_replaced when it arrived
    for (const auto& r : v.results) {
      const std::string key = utf8(r.key, &guest_replaced);
      if (r.values.size() == 1)
        results[key] = r.values[0];
      else
        results[key] = r.values;
    }
    jv["results"] = results;
    nlohmann::json cases = nlohmann::json::array();
    for (const auto& c : v.cases)
      cases.push_back({{"name", utf8(c.name, &guest_replaced)}, {"passed", c.passed && c.ended}});
    jv["cases"] = cases;
    vcpus.push_back(std::move(jv));
  }
  j["vcpus"] = std::move(vcpus);
  j["guest_prints"] = utf8(result.guest_prints, &host_text_replaced);
  // How many guest strings (PRINT, ASSERT, keys, case names) had invalid
  // UTF-8 replaced with U+FFFD; and whether any other text in this report
  // (--param values, paths) had.
  j["guest_text_replaced"] = result.guest_text_replaced();
  j["text_replaced"] = host_text_replaced;
  return j;
}

void write_json_file(const OutputFile& out, const nlohmann::json& json) {
  // `replace`: a stray invalid UTF-8 byte must not cost the whole report.
  out.write(json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + '\n');
}

void write_json_file(const std::string& path, const nlohmann::json& json) {
  write_json_file(OutputFile(path, "--json"), json);
}

}  // namespace lockvisor::report
