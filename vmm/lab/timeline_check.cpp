#include "vmm/lab/timeline_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <fstream>
#include <utility>
#include <vector>

#include "vmm/trace/trace_check.h"
#include "vmm/trace/trace_reader.h"
#include "vmm/util/output_file.h"

namespace lockvisor::lab {
namespace fs = std::filesystem;
namespace {

double share(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

double number(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

// "halted 61.2 %, preempted 30.0 %, guest 8.8 %": the activities that cover
// at least a tenth of a percent, largest first.
std::string activities(const nlohmann::json& ns) {
  if (!ns.is_object()) return "—";
  std::vector<std::pair<std::string, double>> parts;
  double total = 0;
  for (const auto& [name, value] : ns.items()) {
    if (!value.is_number()) continue;
    parts.emplace_back(name, value.get<double>());
    total += value.get<double>();
  }
  std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (const auto& [name, value] : parts)
    if (share(value, total) >= 0.1) out += fmt::format("{}{} {:.1f} %", out.empty() ? "" : ", ", name, share(value, total));
  return out.empty() ? "—" : out;
}

std::string us(double ns) { return fmt::format("{:.2f}", ns * 1e-3); }

}  // namespace

nlohmann::json timeline_check(const fs::path& dir, const std::string& trace) {
  const fs::path file = dir / trace;
  const fs::path json_path = fs::path(file).replace_extension(kCheckJsonExtension);
  try {
    if (fs::exists(json_path)) {
      std::ifstream in(json_path, std::ios::binary);
      return nlohmann::json::parse(in);
    }
    const trace::TraceTimeline timeline = trace::read_trace_file(file.string());
    const trace::TraceCheck check = trace::check_trace(timeline, trace::TraceCheckOptions{});
    auto json = trace::trace_check_json(trace, timeline, check);
    OutputFile(fs::path(file).replace_extension(kCheckTextExtension).string(), "--out")
        .write(trace::format_trace_check(timeline, check, trace::kTraceCheckRunsShown));
    OutputFile(json_path.string(), "--out").write(json.dump(2) + "\n");
    return json;
  } catch (const std::exception& e) {
    std::string why = e.what();
    std::replace(why.begin(), why.end(), '\n', ' ');
    return why;
  }
}

std::string timeline_check_markdown(const nlohmann::json& check, const std::string& trace) {
  if (!check.is_object()) return fmt::format("- No trace-check: {}\n", check.is_string() ? check.get<std::string>() : "?");
  const auto text = fs::path(trace).replace_extension(kCheckTextExtension).string();
  const auto json = fs::path(trace).replace_extension(kCheckJsonExtension).string();
  std::string out = fmt::format("- `lockvisor trace-check` ([text]({}), [JSON]({}))", text, json);
  const auto& bound = check.value("bound", nlohmann::json::object());
  if (bound.value("judged", false)) {
    const auto violations = bound.value("violations", std::uint64_t{0});
    const auto long_waits = bound.value("long_waits", std::uint64_t{0});
    const auto checked = bound.value("checked", std::uint64_t{0});
    out += fmt::format(": pvbounded's bound oracle, T = {:.2f} ms: ", number(bound, "bound_ns") * 1e-6);
    if (long_waits == 0) {
      out += "no wait longer than T";
    } else if (checked == 0) {
      // Nothing judged is no verdict: say so rather than "no violation".
      out += fmt::format("{} {} longer than T, **none checked** (the text says why)", long_waits,
                         long_waits == 1 ? "wait" : "waits");
    } else {
      out += fmt::format("{} {} longer than T, {} checked{}: ", long_waits, long_waits == 1 ? "wait" : "waits", checked,
                         checked < long_waits ? " (the text says why not the others)" : "");
      const auto unsure =
          bound.value("by_reason", nlohmann::json::object()).value(trace::reason_name(trace::Reason::kClockUnsure), std::uint64_t{0});
      out += violations == 0 && unsure != 0
                 ? fmt::format("none shown to break the invariant; {} would by a guest clock that cannot decide them "
                               "(clock-unsure)",
                               unsure)
             : violations == 0 ? std::string("no bypass breaks the invariant")
                             : fmt::format("**{} {} in {} {} the invariant**", violations,
                                           violations == 1 ? "bypass" : "bypasses",
                                           bound.value("waits_with_violation", std::uint64_t{0}),
                                           violations == 1 ? "wait breaks" : "waits break");
    }
  }
  out += "\n";
  if (const auto merged = check.value("merged_slices", std::uint64_t{0}); merged != 0)
    out += fmt::format("- This trace merged runs of short acquisitions into {} slices (`--trace-merge-short`): the "
                       "table counts only the others, and the lock's free time in it includes the merged ones' holds\n",
                       merged);
  const auto& numa = check.value("numa_bound", nlohmann::json::object());
  if (numa.value("judged", false)) {
    const auto over = numa.value("violations", std::uint64_t{0});
    out += fmt::format("- NUMA bound, {}: longest wait {:.2f} ms, longest run {} holders, {} waits checked; {}\n",
                       numa.value("promised", std::string("as the header states")),
                       number(numa, "longest_wait_ns") * 1e-6, numa.value("longest_run", std::uint64_t{0}),
                       numa.value("checked", std::uint64_t{0}),
                       over == 0 ? std::string("no run over it")
                                 : fmt::format("**{} run{} over it**", over, over == 1 ? "" : "s"));
  }
  const auto locks = check.value("locks", nlohmann::json::array());
  if (locks.empty()) out += "- No lock has two whole acquisitions in the trace's window to tabulate\n";
  for (const auto& lock : locks) {
    const double span = number(lock, "span_ns"), acquisitions = number(lock, "acquisitions");
    out += fmt::format("- Lock {}: {:.0f} acquisitions in {:.1f} ms of trace, held {:.1f} % of it\n\n",
                       lock.value("lock", 0u), acquisitions, span * 1e-6, share(number(lock, "held_ns"), span));
    out += "  | path | acquisitions | handoff p50 / p99 / max (µs) | lock free before it | the acquirer while it was free |\n"
           "  |---|---:|---:|---:|---|\n";
    std::vector<std::pair<std::string, const nlohmann::json*>> paths;
    const auto by_path = lock.value("paths", nlohmann::json::object());
    for (const auto& [name, p] : by_path.items()) paths.emplace_back(name, &p);
    std::sort(paths.begin(), paths.end(),
              [](const auto& a, const auto& b) { return number(*a.second, "acquisitions") > number(*b.second, "acquisitions"); });
    for (const auto& [name, p] : paths)
      out += fmt::format("  | {} | {:.0f} ({:.1f} %) | {} / {} / {} | {:.1f} % | {} |\n", name, number(*p, "acquisitions"),
                         share(number(*p, "acquisitions"), acquisitions), us(number(*p, "handoff_p50_ns")),
                         us(number(*p, "handoff_p99_ns")), us(number(*p, "handoff_max_ns")),
                         share(number(*p, "free_before_ns"), span),
                         activities(p->value("acquirer_during_handoff_ns", nlohmann::json())));
    out += "\n";
  }
  return out;
}

}  // namespace lockvisor::lab
