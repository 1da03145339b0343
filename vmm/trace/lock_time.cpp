// Where a lock's time went (lock_time.h).
#include "vmm/trace/lock_time.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "vmm/trace/trace_buffer.h"

namespace lockvisor::trace {
namespace {

constexpr unsigned kUnknownPath = locks::kAcqPathCount;

const char* const kActivityNames[kVcpuActivities] = {"running guest code", "halted", "parked", "preempted by the host",
                                                     "in a VMM exit", "on no lane"};

struct Segment {
  std::uint64_t begin_ns, end_ns;
  VcpuActivity what;
};

// One vCPU's lanes flattened into disjoint segments, each labelled with the
// activity that explains it best: parked, then halted (a halt nests inside
// its exit), then preempted (the host lane overlaps KVM_RUN), then a VMM
// exit, then guest code. What no lane covers is "on no lane" (between
// slices, or a lane that was cut).
std::vector<Segment> flatten(const TracedVcpu& v) {
  // Priority order: a lower number wins.
  std::vector<std::tuple<std::uint64_t, int, unsigned>> edges;  // time, +1/-1, activity
  auto add = [&edges](const std::vector<Span>& spans, VcpuActivity a) {
    for (const Span& s : spans) {
      if (s.end_ns <= s.begin_ns) continue;
      edges.emplace_back(s.begin_ns, +1, static_cast<unsigned>(a));
      edges.emplace_back(s.end_ns, -1, static_cast<unsigned>(a));
    }
  };
  add(v.parked, VcpuActivity::kParked);
  add(v.halted, VcpuActivity::kHalted);
  add(v.preempted, VcpuActivity::kPreempted);
  add(v.exits, VcpuActivity::kExit);
  add(v.guest, VcpuActivity::kGuest);
  std::sort(edges.begin(), edges.end());
  static constexpr VcpuActivity kOrder[] = {VcpuActivity::kParked, VcpuActivity::kHalted, VcpuActivity::kPreempted,
                                            VcpuActivity::kExit, VcpuActivity::kGuest};
  std::array<int, kVcpuActivities> open{};
  std::vector<Segment> out;
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < edges.size();) {
    const std::uint64_t t = std::get<0>(edges[i]);
    if (t > at) {
      VcpuActivity now = VcpuActivity::kOther;
      for (VcpuActivity a : kOrder)
        if (open[static_cast<unsigned>(a)] > 0) {
          now = a;
          break;
        }
      if (now != VcpuActivity::kOther) {
        if (!out.empty() && out.back().what == now && out.back().end_ns == at)
          out.back().end_ns = t;
        else
          out.push_back({at, t, now});
      }
    }
    for (; i < edges.size() && std::get<0>(edges[i]) == t; ++i) open[std::get<2>(edges[i])] += std::get<1>(edges[i]);
    at = t;
  }
  return out;
}

// Adds the time of each activity of `segments` inside [a, b] to `into`; the
// rest of [a, b] counts as "on no lane".
void tally(const std::vector<Segment>& segments, std::uint64_t a, std::uint64_t b,
           std::array<std::uint64_t, kVcpuActivities>& into) {
  std::uint64_t covered = 0;
  auto it = std::upper_bound(segments.begin(), segments.end(), a,
                             [](std::uint64_t x, const Segment& s) { return x < s.end_ns; });
  for (; it != segments.end() && it->begin_ns < b; ++it) {
    const std::uint64_t d = std::min(b, it->end_ns) - std::max(a, it->begin_ns);
    into[static_cast<unsigned>(it->what)] += d;
    covered += d;
  }
  into[static_cast<unsigned>(VcpuActivity::kOther)] += (b - a) - covered;
}

double percent(std::uint64_t part, std::uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

// The nearest-rank `q` quantile (0 < q <= 1) of sorted values.
std::uint64_t quantile(const std::vector<std::uint64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  std::size_t rank = static_cast<std::size_t>(q * static_cast<double>(sorted.size()) + 0.999999);
  rank = std::clamp<std::size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

// "running guest code 80.0 %, halted 20.0 %": the activities of `ns`, largest first.
std::string shares(const std::array<std::uint64_t, kVcpuActivities>& ns) {
  std::uint64_t total = 0;
  for (std::uint64_t x : ns) total += x;
  std::vector<unsigned> idx;
  for (unsigned a = 0; a < kVcpuActivities; ++a)
    if (ns[a] != 0) idx.push_back(a);
  std::sort(idx.begin(), idx.end(), [&ns](unsigned a, unsigned b) { return ns[a] > ns[b]; });
  std::string s;
  for (unsigned a : idx) s += fmt::format("{}{} {:.1f} %", s.empty() ? "" : ", ", kActivityNames[a], percent(ns[a], total));
  return s;
}

std::string us(std::uint64_t ns) { return fmt::format("{:.2f}", static_cast<double>(ns) * 1e-3); }

const char* const kActivityKeys[kVcpuActivities] = {"guest", "halted", "parked", "preempted", "exit", "none"};

nlohmann::json activity_json(const std::array<std::uint64_t, kVcpuActivities>& ns) {
  nlohmann::json j = nlohmann::json::object();
  for (unsigned a = 0; a < kVcpuActivities; ++a) j[kActivityKeys[a]] = ns[a];
  return j;
}

}  // namespace

const char* activity_name(VcpuActivity a) { return kActivityNames[static_cast<unsigned>(a)]; }

std::vector<LockTime> lock_time(const TraceTimeline& t, std::uint64_t long_gap_ns) {
  // The span every lock lane kept.
  std::uint64_t until = t.end_ns;
  for (const TracedVcpu& v : t.vcpu)
    if (v.lock_lane_until) until = std::min(until, *v.lock_lane_until);
  std::map<std::uint32_t, std::vector<const TracedAcquisition*>> by_lock;
  for (const TracedAcquisition& x : t.acquisitions)
    if (x.released_ns && *x.released_ns <= until && x.vcpu < t.vcpu.size()) by_lock[x.lock].push_back(&x);
  std::vector<std::vector<Segment>> lanes;
  for (const TracedVcpu& v : t.vcpu) lanes.push_back(flatten(v));

  std::vector<LockTime> out;
  for (auto& [lock, holds] : by_lock) {
    if (holds.size() < 2) continue;
    std::sort(holds.begin(), holds.end(),
              [](const TracedAcquisition* a, const TracedAcquisition* b) { return a->acquired_ns < b->acquired_ns; });
    LockTime r;
    r.lock = lock;
    r.long_gap_ns = long_gap_ns;
    r.acquisitions = holds.size();
    std::uint64_t last_release = 0;
    std::array<std::vector<std::uint64_t>, kUnknownPath + 1> latencies;
    for (std::size_t i = 0; i < holds.size(); ++i) {
      const TracedAcquisition& x = *holds[i];
      const unsigned p = x.path < locks::kAcqPathCount ? x.path : kUnknownPath;
      PathTime& pt = r.paths[p];
      ++pt.acquisitions;
      if (x.arrive_ns && *x.arrive_ns < x.acquired_ns) {
        ++pt.waits;
        pt.wait_ns += x.acquired_ns - *x.arrive_ns;
        tally(lanes[x.vcpu], *x.arrive_ns, x.acquired_ns, pt.wait_activity_ns);
      } else if (x.arrive_ns) {
        ++pt.waits;
      }
      if (i != 0) latencies[p].push_back(x.acquired_ns > last_release ? x.acquired_ns - last_release : 0);
      if (i != 0 && x.acquired_ns > last_release) {
        const std::uint64_t gap = x.acquired_ns - last_release;
        r.free_before_ns[p] += gap;
        ++r.gaps[p];
        tally(lanes[x.vcpu], last_release, x.acquired_ns, pt.handoff_activity_ns);
        if (gap >= long_gap_ns) {
          ++r.long_gaps;
          r.long_total_ns += gap;
          r.long_by_path_ns[p] += gap;
          tally(lanes[x.vcpu], last_release, x.acquired_ns, r.acquirer_ns);
          for (unsigned w = 0; w < lanes.size(); ++w)
            if (w != x.vcpu) tally(lanes[w], last_release, x.acquired_ns, r.others_ns);
        }
      }
      last_release = std::max(last_release, *x.released_ns);
    }
    for (unsigned p = 0; p <= kUnknownPath; ++p) {
      std::vector<std::uint64_t>& l = latencies[p];
      std::sort(l.begin(), l.end());
      r.paths[p].handoffs = l.size();
      r.paths[p].handoff_p50_ns = quantile(l, 0.5);
      r.paths[p].handoff_p99_ns = quantile(l, 0.99);
      r.paths[p].handoff_max_ns = l.empty() ? 0 : l.back();
    }
    r.span_ns = last_release - holds.front()->acquired_ns;
    // Held = not free: the trace's clocks may let two holds overlap by a
    // few nanoseconds, so summing the holds could exceed the span.
    std::uint64_t free = 0;
    for (std::uint64_t f : r.free_before_ns) free += f;
    r.held_ns = r.span_ns - free;
    out.push_back(r);
  }
  return out;
}

std::string format_lock_time(const std::vector<LockTime>& locks) {
  std::string out;
  for (const LockTime& r : locks) {
    const std::uint64_t free = r.span_ns - r.held_ns;
    out += fmt::format("lock {} time: {} acquisitions in {:.1f} ms; held {:.1f} %, free {:.1f} %", r.lock, r.acquisitions,
                       static_cast<double>(r.span_ns) * 1e-6, percent(r.held_ns, r.span_ns), percent(free, r.span_ns));
    std::vector<unsigned> order;
    for (unsigned p = 0; p <= kUnknownPath; ++p)
      if (r.gaps[p] != 0) order.push_back(p);
    std::sort(order.begin(), order.end(),
              [&r](unsigned a, unsigned b) { return r.free_before_ns[a] > r.free_before_ns[b]; });
    std::string parts;
    for (unsigned p : order)
      parts += fmt::format("{}{} {:.1f} % ({} gaps, mean {:.2f} us)", parts.empty() ? "" : ", ", acq_path_name(p),
                           percent(r.free_before_ns[p], r.span_ns), r.gaps[p],
                           static_cast<double>(r.free_before_ns[p]) * 1e-3 / static_cast<double>(r.gaps[p]));
    out += parts.empty() ? "\n" : fmt::format("; free before: {}\n", parts);
    for (unsigned p = 0; p <= kUnknownPath; ++p) {
      const PathTime& pt = r.paths[p];
      if (pt.acquisitions == 0) continue;
      out += fmt::format("  {:<8} {:>9} acquisitions ({:.1f} %)", acq_path_name(p), pt.acquisitions,
                         percent(pt.acquisitions, r.acquisitions));
      if (pt.handoffs != 0)
        out += fmt::format("; handoff p50 {} us, p99 {} us, max {} us", us(pt.handoff_p50_ns), us(pt.handoff_p99_ns),
                           us(pt.handoff_max_ns));
      if (r.gaps[p] != 0) out += fmt::format("; while it was free the acquirer was {}", shares(pt.handoff_activity_ns));
      if (pt.wait_ns != 0)
        out += fmt::format("; its waits (mean {} us) were {}", us(pt.wait_ns / pt.waits), shares(pt.wait_activity_ns));
      out += "\n";
    }
    if (r.long_gaps == 0) continue;
    std::string paths;
    for (unsigned p = 0; p <= kUnknownPath; ++p)
      if (r.long_by_path_ns[p] != 0)
        paths += fmt::format("{}{} {:.1f} %", paths.empty() ? "" : ", ", acq_path_name(p),
                             percent(r.long_by_path_ns[p], r.long_total_ns));
    out += fmt::format(
        "  {} free gaps of {:.0f} us or more, {:.1f} % of the span (before: {}); the vCPU that then took the lock "
        "was meanwhile {}; the other vCPUs were {}\n",
        r.long_gaps, static_cast<double>(r.long_gap_ns) * 1e-3, percent(r.long_total_ns, r.span_ns), paths,
        shares(r.acquirer_ns), shares(r.others_ns));
  }
  return out;
}

nlohmann::json lock_time_json(const std::vector<LockTime>& locks) {
  nlohmann::json out = nlohmann::json::array();
  for (const LockTime& r : locks) {
    nlohmann::json paths = nlohmann::json::object();
    for (unsigned p = 0; p <= kUnknownPath; ++p) {
      const PathTime& pt = r.paths[p];
      if (pt.acquisitions == 0) continue;
      paths[acq_path_name(p)] = {{"acquisitions", pt.acquisitions},
                             {"handoffs", pt.handoffs},
                             {"handoff_p50_ns", pt.handoff_p50_ns},
                             {"handoff_p99_ns", pt.handoff_p99_ns},
                             {"handoff_max_ns", pt.handoff_max_ns},
                             {"free_before_ns", r.free_before_ns[p]},
                             {"free_gaps", r.gaps[p]},
                             {"acquirer_during_handoff_ns", activity_json(pt.handoff_activity_ns)},
                             {"waits", pt.waits},
                             {"wait_ns", pt.wait_ns},
                             {"acquirer_during_wait_ns", activity_json(pt.wait_activity_ns)}};
    }
    out.push_back({{"lock", r.lock},
                   {"span_ns", r.span_ns},
                   {"acquisitions", r.acquisitions},
                   {"held_ns", r.held_ns},
                   {"paths", std::move(paths)},
                   {"long_gap_ns", r.long_gap_ns},
                   {"long_gaps", r.long_gaps},
                   {"long_total_ns", r.long_total_ns},
                   {"long_acquirer_ns", activity_json(r.acquirer_ns)},
                   {"long_others_ns", activity_json(r.others_ns)}});
  }
  return out;
}

}  // namespace lockvisor::trace
