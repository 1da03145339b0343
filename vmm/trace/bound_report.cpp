// The bound oracle's text (bound_check.h): a line per long wait, its runs of
// bypasses, the summary and the legend of the reasons seen.
#include <fmt/format.h>

#include <array>
#include <set>

#include "locks/lock_events.h"
#include "vmm/trace/bound_check.h"
#include "vmm/trace/trace_buffer.h"

namespace lockvisor::trace {
namespace {
std::string ms(std::uint64_t ns) { return fmt::format("{:.3f}", static_cast<double>(ns) * 1e-6); }
}  // namespace

std::string format_bound_report(const TraceTimeline& t, const BoundReport& r, std::size_t runs) {
  std::string out;
  const auto& a = t.acquisitions;
  std::array<std::uint64_t, kVerdicts> all_verdicts{};
  for (const LongWait& w : r.long_waits) {
    const TracedAcquisition& x = a[w.wait];
    std::array<std::uint64_t, locks::kAcqPathCount + 1> paths{};
    std::array<std::uint64_t, kVerdicts> verdicts{};
    for (const Bypass& b : w.bypasses) {
      const std::uint8_t p = a[b.by].path;
      ++paths[p < locks::kAcqPathCount ? p : locks::kAcqPathCount];
      ++verdicts[static_cast<unsigned>(reason_verdict(b.reason))];
    }
    if (w.checked)
      for (unsigned v = 0; v < kVerdicts; ++v) all_verdicts[v] += verdicts[v];
    std::string by_path;
    for (unsigned p = 0; p <= locks::kAcqPathCount; ++p)
      if (paths[p] != 0)
        by_path += fmt::format("{}{} {}", by_path.empty() ? "" : ", ", acq_path_name(p), paths[p]);
    const std::uint64_t wait = x.acquired_ns - *x.arrive_ns;
    out += fmt::format(
        "wait: vCPU {} lock {} waited {} ms from {} ms (it ran {} ms, preempted {} ms, halted {} ms; "
        "lock held by others {} ms); {} bypasses{}{}{}",
        x.vcpu, x.lock, ms(wait), ms(*x.arrive_ns), ms(w.running_ns), ms(w.preempted_ns), ms(w.halted_ns),
        ms(w.held_ns), w.bypasses.size(), by_path.empty() ? "" : " (", by_path, by_path.empty() ? "" : ")");
    if (!w.checked) {
      out += fmt::format("; not checked: {}\n", w.unchecked_why);
      continue;
    }
    out += fmt::format(": allowed {}, explained {}, violations {}{}\n", verdicts[0], verdicts[1], verdicts[2],
                       verdicts[3] ? fmt::format(", unknown {}", verdicts[3]) : std::string());
    // Runs: consecutive bypasses with the same path, reason and head.
    std::size_t shown = 0, total_runs = 0;
    for (std::size_t i = 0; i < w.bypasses.size();) {
      std::size_t j = i;
      std::set<unsigned> by;
      while (j < w.bypasses.size() && a[w.bypasses[j].by].path == a[w.bypasses[i].by].path &&
             w.bypasses[j].reason == w.bypasses[i].reason && w.bypasses[j].would_be == w.bypasses[i].would_be &&
             w.bypasses[j].head == w.bypasses[i].head) {
        by.insert(a[w.bypasses[j].by].vcpu);
        ++j;
      }
      ++total_runs;
      if (shown < runs) {
        const Bypass& first = w.bypasses[i];
        std::string who;
        for (unsigned v : by) who += fmt::format("{}{}", who.empty() ? "" : ",", v);
        std::uint64_t kick_lo = ~std::uint64_t{0}, kick_hi = 0;
        for (std::size_t k = i; k < j; ++k)
          if (w.bypasses[k].kicked_ago_ns != 0) {
            kick_lo = std::min(kick_lo, w.bypasses[k].kicked_ago_ns);
            kick_hi = std::max(kick_hi, w.bypasses[k].kicked_ago_ns);
          }
        std::string head;
        if (first.head >= 0) head = fmt::format(" (vCPU {}", first.head);
        if (first.head >= 0 && kick_hi != 0) head += fmt::format(", kicked {}..{} ms before", ms(kick_lo), ms(kick_hi));
        if (first.head >= 0) head += ")";
        const std::uint8_t p = a[first.by].path;
        out += fmt::format("  {}..{} ms  {} {} by vCPU {}: {} {}{}\n", ms(a[first.by].acquired_ns),
                           ms(a[w.bypasses[j - 1].by].acquired_ns), j - i, acq_path_name(p), who,
                           verdict_name(reason_verdict(first.reason)),
                           first.reason == Reason::kClockUnsure
                               ? fmt::format("{} (would be {})", reason_name(first.reason), reason_name(first.would_be))
                               : std::string(reason_name(first.reason)),
                           head);
        ++shown;
      }
      i = j;
    }
    if (total_runs > shown && runs != 0) out += fmt::format("  ... {} more runs (--runs N)\n", total_runs - shown);
  }
  std::size_t checked = 0;
  for (const LongWait& w : r.long_waits) checked += w.checked;
  out += fmt::format(
      "trace-check: {}T = {} us{} (grace {} us, resume {} us, steal phase {} us{}{}): {} waits longer than T "
      "of {}, {} checked; bypasses: allowed {}, explained {}, violations {}, unknown {}\n",
      r.rules.judged ? "pvbounded, " : "not a pvbounded run (bypasses listed, not judged), ", r.rules.bound_ns / 1000,
      r.rules.aim_ns != 0 && r.rules.aim_ns < r.rules.bound_ns
          ? fmt::format(" (the adaptive bound's ceiling, pvb_bound_max_us; it starts at {} us)", r.rules.aim_ns / 1000)
          : std::string(),
      r.rules.grace_ns / 1000, r.rules.resume_ns / 1000, r.rules.steal_phase_ns / 1000,
      r.rules.head_ns ? fmt::format(", T_head {} us", r.rules.head_ns / 1000) : std::string(),
      r.rules.lending ? ", lending on" : "", r.long_waits.size(), r.waits, checked, all_verdicts[0], all_verdicts[1],
      all_verdicts[2], all_verdicts[3]);
  for (unsigned i = 0; i < static_cast<unsigned>(Reason::kCount); ++i)
    if (r.by_reason[i] != 0)
      out += fmt::format("  {:<15} {:>9}  {}: {}{}\n", reason_name(static_cast<Reason>(i)), r.by_reason[i],
                         verdict_name(reason_verdict(static_cast<Reason>(i))), reason_text(static_cast<Reason>(i)),
                         static_cast<Reason>(i) == Reason::kHeadHalted && r.max_kicked_ago_ns != 0
                             ? fmt::format(" (kicked up to {} ms before)", ms(r.max_kicked_ago_ns))
                             : std::string());
  for (const std::string& note : r.notes) out += fmt::format("note: {}\n", note);
  const std::uint64_t unsure = r.by_reason[static_cast<unsigned>(Reason::kClockUnsure)];
  // A wait the trace does not hold whole was not judged: the result says so
  // rather than reading as a pass over waits nobody looked at.
  const std::size_t unchecked = r.long_waits.size() - checked;
  const std::string scope =
      unchecked == 0 ? std::string()
                     : fmt::format(" in the {} checked {}; {} of the {} {} longer than T {} not checked (`not checked:` "
                                   "above says why)",
                                   checked, checked == 1 ? "wait" : "waits", unchecked, r.long_waits.size(),
                                   r.long_waits.size() == 1 ? "wait" : "waits", unchecked == 1 ? "was" : "were");
  out += r.violations != 0 ? fmt::format("result: {} bypasses in {} waits break the invariant\n", r.violations,
                                         r.waits_with_violation)
         : unsure != 0 ? fmt::format("result: no bypass is shown to break the invariant{}; {} would by this trace's "
                                     "guest clock, which cannot decide them (clock-unsure)\n",
                                     scope, unsure)
                       : fmt::format("result: no bypass breaks the invariant{}\n", scope);
  return out;
}

}  // namespace lockvisor::trace
