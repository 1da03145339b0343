// The NUMA locks' bound oracle (numa_bound_check.h).
#include "vmm/trace/numa_bound_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "locks/lock_events.h"
#include "locks/pvbounded_tuning.h"
#include "vmm/trace/bound_check.h"

namespace lockvisor::trace {
namespace {

std::string as_ms(std::uint64_t ns) { return fmt::format("{:.3f}", static_cast<double>(ns) * 1e-6); }

// Whether every lock lane is complete until `until`.
bool lanes_complete(const TraceTimeline& t, std::uint64_t until) {
  for (const TracedVcpu& v : t.vcpu)
    if (v.lock_lane_until && *v.lock_lane_until < until) return false;
  return true;
}

// Whether vCPU `v` was off its CPU (preempted, or parked by the VMM) at some
// time in [begin, end].
bool off_cpu(const TraceTimeline& t, unsigned v, std::uint64_t begin, std::uint64_t end) {
  if (v >= t.vcpu.size()) return false;
  for (const auto* spans : {&t.vcpu[v].preempted, &t.vcpu[v].parked})
    for (const Span& s : *spans)
      if (s.begin_ns <= end && s.end_ns >= begin) return true;
  return false;
}

}  // namespace

bool states_numa_bound(std::string_view lock) {
  return lock == "cna" || lock == "pvcna" || lock == "hq" || lock == "pvhq";
}

NumaBoundRules numa_bound_rules(std::string_view lock, const std::vector<std::pair<std::string, std::string>>& params) {
  namespace pvb = locks::pvb;
  NumaBoundRules r;
  r.lock = std::string(lock);
  std::uint64_t cna = pvb::kDefaultCnaThreshold, cna_us = pvb::kDefaultCnaThresholdUs;
  std::uint64_t hq = pvb::kDefaultHqFairness, hq_us = pvb::kDefaultHqFairnessUs;
  for (const auto& [key, value] : params) {
    const pvb::TuningKey* k = pvb::find_tuning_key(key.data(), key.size());
    locks::u64 n = 0;
    if (k == nullptr || pvb::check_tuning_value(*k, value.c_str(), &n) != pvb::TuningCheck::kValid) continue;
    if (k->field == &pvb::Tuning::cna_threshold) cna = n;
    if (k->field == &pvb::Tuning::cna_threshold_us) cna_us = n;
    if (k->field == &pvb::Tuning::hq_fairness) hq = n;
    if (k->field == &pvb::Tuning::hq_fairness_us) hq_us = n;
  }
  const bool is_cna = lock == "cna" || lock == "pvcna";
  r.holders = is_cna ? cna : hq;
  r.time_ns = (is_cna ? cna_us : hq_us) * 1000;
  r.per_node_extra = states_numa_bound(lock) && !is_cna;
  r.fast_means_unqueued = is_cna;
  return r;
}

NumaBoundRules numa_bound_rules_from(const nlohmann::json& metadata) {
  const auto args = run_args(metadata);
  std::string lock;
  for (const auto& [key, value] : args)
    if (key == "lock") lock = value;
  NumaBoundRules r = numa_bound_rules(lock, args);
  const auto nodes = metadata.find("vcpu_node");
  if (nodes != metadata.end() && nodes->is_array())
    for (const auto& n : *nodes)
      r.vcpu_node.push_back(n.is_number_integer() && n.get<long long>() >= 0 ? n.get<unsigned>() : 0u);
  r.judged = states_numa_bound(lock) && !r.vcpu_node.empty();
  return r;
}

std::string promised_bound_text(const NumaBoundRules& rules) {
  return fmt::format("runs of at most {} holders{}{}", rules.holders,
                     rules.per_node_extra ? " (plus one per vCPU of the node)" : "",
                     rules.time_ns ? fmt::format(" or {} us", rules.time_ns / 1000) : std::string());
}

NumaBoundReport check_numa_bound(const TraceTimeline& t, const NumaBoundRules& rules) {
  NumaBoundReport r;
  r.rules = rules;
  const auto& a = t.acquisitions;
  auto node_of = [&](unsigned vcpu) { return vcpu < rules.vcpu_node.size() ? rules.vcpu_node[vcpu] : 0u; };
  std::vector<std::uint64_t> node_vcpus;
  for (unsigned n : rules.vcpu_node) {
    if (n >= node_vcpus.size()) node_vcpus.resize(n + 1, 0);
    ++node_vcpus[n];
  }
  // Acquisitions of each lock in acquisition order.
  std::vector<std::size_t> order(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return a[x].lock != a[y].lock ? a[x].lock < a[y].lock : a[x].acquired_ns < a[y].acquired_ns;
  });
  for (std::size_t oi = 0; oi < order.size(); ++oi) {
    const std::size_t w = order[oi];
    const TracedAcquisition& x = a[w];
    if (!x.arrive_ns) continue;
    ++r.waits;
    const std::uint64_t wait = x.acquired_ns - *x.arrive_ns;
    if (wait > r.longest_wait_ns) r.longest_wait_ns = wait, r.longest_wait = w;
    if (!rules.judged || *x.arrive_ns < t.begin_ns || !lanes_complete(t, x.acquired_ns)) continue;
    ++r.checked;
    // The acquisitions of the same lock during the wait, earliest first.
    std::size_t from = oi;
    while (from > 0 && a[order[from - 1]].lock == x.lock && a[order[from - 1]].acquired_ns > *x.arrive_ns) --from;
    NumaRun run;
    bool open = false;
    auto close = [&] {
      if (!open) return;
      open = false;
      ++r.runs;
      r.longest_run = std::max(r.longest_run, run.holders);
      r.longest_decided_ns = std::max(r.longest_decided_ns, run.decided_ns);
      const std::uint64_t allowed = rules.holders + (rules.per_node_extra ? node_vcpus[run.node] : 0);
      run.over_holders = run.holders - run.steals > allowed;
      run.over_time = rules.time_ns != 0 && run.decided_ns > rules.time_ns + rules.slack_ns;
      // A waiter off its CPU before the run ended may not have queued yet
      // (the trace's arrival precedes the lock's enqueue): not judged.
      if ((run.over_holders || run.over_time) && off_cpu(t, x.vcpu, *x.arrive_ns, a[run.last].acquired_ns)) {
        ++r.explained;
        return;
      }
      if (run.over_holders || run.over_time) r.violations.push_back(run);
    };
    std::size_t prev_in_run = 0;
    std::optional<std::size_t> first_handoff;
    for (std::size_t k = from; k < oi; ++k) {
      const std::size_t b = order[k];
      const TracedAcquisition& y = a[b];
      // cna/pvcna: a fast-path acquisition needs a word without a queue, so
      // the waiter had not queued yet: what came before is not the lock's.
      if (rules.fast_means_unqueued && y.path == static_cast<std::uint8_t>(locks::AcqPath::fast)) {
        open = false;
        continue;
      }
      const bool bypass = y.vcpu != x.vcpu && node_of(y.vcpu) != node_of(x.vcpu) &&
                          (!y.arrive_ns || *y.arrive_ns > *x.arrive_ns);
      if (!bypass || (open && node_of(y.vcpu) != run.node)) close();
      if (!bypass) continue;
      const bool steal = y.path == static_cast<std::uint8_t>(locks::AcqPath::steal);
      if (!open) {
        run = NumaRun{.wait = w, .first = b, .last = b, .node = node_of(y.vcpu)};
        open = true;
        first_handoff = steal ? std::optional<std::size_t>() : b;
      } else {
        // The time the handoffs decided: from the run's first handoff to
        // its second-to-last one (steals decide nothing).
        if (first_handoff && !steal && prev_in_run != *first_handoff)
          run.decided_ns = a[prev_in_run].acquired_ns - a[*first_handoff].acquired_ns;
        if (!first_handoff && !steal) first_handoff = b;
        run.last = b;
      }
      if (!steal) prev_in_run = b;
      ++run.holders;
      if (steal) ++run.steals;
    }
    close();
  }
  return r;
}

std::string format_numa_bound_report(const TraceTimeline& t, const NumaBoundReport& r, std::size_t shown) {
  const auto& a = t.acquisitions;
  std::string out;
  for (std::size_t i = 0; i < r.violations.size() && i < shown; ++i) {
    const NumaRun& v = r.violations[i];
    const TracedAcquisition& w = a[v.wait];
    out += fmt::format(
        "numa run: vCPU {} (node {}) lock {} waiting from {} ms: {} holders of node {} from {} to {} ms{} "
        "(the decision to go on {} ms after the first){}{}\n",
        w.vcpu, v.wait < a.size() && w.vcpu < r.rules.vcpu_node.size() ? r.rules.vcpu_node[w.vcpu] : 0, w.lock,
        as_ms(*w.arrive_ns), v.holders, v.node, as_ms(a[v.first].acquired_ns), as_ms(a[v.last].acquired_ns),
        v.steals ? fmt::format(", {} steals", v.steals) : std::string(), as_ms(v.decided_ns),
        v.over_holders ? ": over the holders bound" : "", v.over_time ? ": over the time bound" : "");
  }
  if (r.violations.size() > shown) out += fmt::format("... {} more runs over the bound\n", r.violations.size() - shown);
  if (!r.rules.judged) {
    out += fmt::format("numa bound: {} not judged ({})\n", r.rules.lock,
                       r.rules.vcpu_node.empty() ? "no --vnuma topology in the trace" : "not a NUMA lock");
    return out;
  }
  const std::string bound = promised_bound_text(r.rules);
  out += fmt::format(
      "numa bound: {}, promised {}: longest wait {} ms (vCPU {}); {} waits, {} checked, {} runs of bypasses by "
      "another node, longest {} holders, decided up to {} ms after their first; runs over the bound {} (and {} "
      "more with the waiter off its CPU before they ended, maybe not yet queued: not judged)\n",
      r.rules.lock, bound, as_ms(r.longest_wait_ns), r.waits ? a[r.longest_wait].vcpu : 0, r.waits, r.checked, r.runs,
      r.longest_run, as_ms(r.longest_decided_ns), r.violations.size(), r.explained);
  return out;
}

}  // namespace lockvisor::trace
