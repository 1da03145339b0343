#include "vmm/trace/trace_window.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <utility>

#include "vmm/util/duration_text.h"
#include "vmm/util/error.h"

namespace lockvisor::trace {
namespace {

constexpr std::uint64_t kMinPadNs = 1000000;  // 1 ms: a halt and a kick fit in it on PVM
constexpr std::uint64_t kMaxNs = 3600ull * 1000000000ull;  // an hour: longer than any run's watchdog

[[noreturn]] void bad(std::string_view text, std::string_view why) {
  fail("--trace-window '{}': {} (all, START:END such as 120ms:125ms, or worst-wait[:PAD] such as worst-wait:2ms)",
       text, why);
}

// "125ms" -> ns; nullopt when it is no such thing (or longer than an hour).
std::optional<std::uint64_t> try_duration_ns(std::string_view text, bool* too_long) {
  const auto split = split_duration_unit(text);
  if (!split) return std::nullopt;
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(split->digits.data(), split->digits.data() + split->digits.size(), n);
  if (ec != std::errc() || end != split->digits.data() + split->digits.size()) return std::nullopt;
  if (n > kMaxNs / split->ns_per_unit) {
    *too_long = true;
    return std::nullopt;
  }
  return n * split->ns_per_unit;
}

std::uint64_t duration_ns(std::string_view whole, std::string_view text) {
  bool too_long = false;
  if (const auto ns = try_duration_ns(text, &too_long)) return *ns;
  if (too_long) bad(whole, fmt::format("{} is longer than an hour", text));
  bad(whole, fmt::format("'{}' is not an integer with a unit (ns, us, ms, s)", text));
}

std::string us_text(std::uint64_t ns) { return fmt::format("{}.{:03}", ns / 1000, ns % 1000); }

}  // namespace

std::uint64_t parse_trace_duration(std::string_view option, std::string_view text) {
  bool too_long = false;
  if (const auto ns = try_duration_ns(text, &too_long)) return *ns;
  fail("{} '{}': {}", option, text,
       too_long ? "longer than an hour" : "expected an integer with a unit (ns, us, ms, s), e.g. 10us");
}

TraceWindowSpec parse_trace_window(std::string_view text) {
  TraceWindowSpec spec;
  if (text == "all") return spec;
  if (text == "worst-wait" || text.starts_with("worst-wait:")) {
    spec.kind = TraceWindowSpec::Kind::kWorstWait;
    if (text.size() > 10) spec.pad_ns = duration_ns(text, text.substr(11));
    return spec;
  }
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) bad(text, "unknown window");
  spec.kind = TraceWindowSpec::Kind::kRange;
  spec.begin_ns = duration_ns(text, text.substr(0, colon));
  spec.end_ns = duration_ns(text, text.substr(colon + 1));
  if (spec.end_ns <= spec.begin_ns) bad(text, "END must be after START");
  return spec;
}

std::string format_trace_window(const TraceWindowSpec& spec) {
  switch (spec.kind) {
    case TraceWindowSpec::Kind::kAll: return "all";
    case TraceWindowSpec::Kind::kRange: return fmt::format("{}ns:{}ns", spec.begin_ns, spec.end_ns);
    case TraceWindowSpec::Kind::kWorstWait:
      return spec.pad_ns ? fmt::format("worst-wait:{}ns", *spec.pad_ns) : std::string("worst-wait");
  }
  return "all";
}

std::optional<ResolvedWindow> resolve_trace_window(const TraceWindowSpec& spec, const Trace& trace, std::string* note) {
  const std::uint64_t origin = trace.origin_ns();
  ResolvedWindow w;
  w.description = {{"spec", format_trace_window(spec)}};
  switch (spec.kind) {
    case TraceWindowSpec::Kind::kAll: return std::nullopt;
    case TraceWindowSpec::Kind::kRange:
      w.begin_ns = origin + spec.begin_ns;
      w.end_ns = origin + spec.end_ns;
      break;
    case TraceWindowSpec::Kind::kWorstWait: {
      // The longest wait over every lock lane; ties go to the earliest vCPU
      // and record, so the same trace always gives the same window.
      const Event* worst = nullptr;
      unsigned worst_vcpu = 0;
      std::uint64_t waits = 0;
      for (unsigned i = 0; i < trace.vcpus(); ++i)
        for (const Event& e : trace.lock_lane(i).events()) {
          if (e.kind != EventKind::kLockWait) continue;
          ++waits;
          if (worst == nullptr || e.end_ns - e.begin_ns > worst->end_ns - worst->begin_ns) {
            worst = &e;
            worst_vcpu = i;
          }
        }
      if (worst == nullptr) {
        if (note) *note = "no lock waits in the trace: the whole run is written";
        return std::nullopt;
      }
      const std::uint64_t wait = worst->end_ns - worst->begin_ns;
      const std::uint64_t pad = spec.pad_ns.value_or(std::max(wait / 2, kMinPadNs));
      w.begin_ns = worst->begin_ns > pad ? worst->begin_ns - pad : 0;
      w.end_ns = worst->end_ns + std::min(pad, std::numeric_limits<std::uint64_t>::max() - worst->end_ns);
      // begin_us is on the trace's clock (since the origin), like every ts.
      w.description["worst_wait"] = {{"vcpu", worst_vcpu},
                                     {"lock", worst->arg},
                                     {"begin_us", std::stod(us_text(worst->begin_ns - origin))},
                                     {"wait_us", std::stod(us_text(wait))},
                                     {"waits_searched", waits}};
      w.description["pad_us"] = std::stod(us_text(pad));
      break;
    }
  }
  const auto rel = [&](std::uint64_t ns) {
    return ns >= origin ? std::stod(us_text(ns - origin)) : -std::stod(us_text(origin - ns));
  };
  w.description["begin_us"] = rel(w.begin_ns);
  w.description["end_us"] = rel(w.end_ns);
  return w;
}

std::string window_words(const ResolvedWindow& window, const Trace& trace) {
  const auto ms = [](double us) { return us / 1e3; };
  const nlohmann::json& d = window.description;
  std::string out =
      fmt::format(", window {:.3f}..{:.3f} ms", ms(d["begin_us"].get<double>()), ms(d["end_us"].get<double>()));
  if (d.contains("worst_wait"))
    out += fmt::format(" around the worst lock wait ({:.3f} ms, vCPU {})", ms(d["worst_wait"]["wait_us"].get<double>()),
                       d["worst_wait"]["vcpu"].get<unsigned>());
  // Kicks and wakes are instants inside exit slices: the slices decide.
  std::uint64_t first = ~std::uint64_t{0}, last = 0;
  for (unsigned i = 0; i < trace.vcpus(); ++i)
    for (const TraceBuffer* lane : {&trace.vcpu_lane(i), &trace.host_lane(i), &trace.lock_lane(i)})
      for (const Event& e : lane->events()) {
        if (e.kind == EventKind::kKick || e.kind == EventKind::kWake) continue;
        if (window.holds(e)) return out;
        first = std::min(first, e.begin_ns);
        last = std::max(last, e.end_ns);
      }
  const std::uint64_t origin = trace.origin_ns();
  const auto since = [origin](std::uint64_t ns) { return static_cast<double>(ns > origin ? ns - origin : 0) / 1e6; };
  if (first > last) return out + ": empty, the run recorded no events";
  return out + fmt::format(": empty, the run's events lie in {:.3f}..{:.3f} ms", since(first), since(last));
}

}  // namespace lockvisor::trace
