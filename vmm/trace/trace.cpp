#include "vmm/trace/trace.h"

#include <algorithm>

namespace lockvisor::trace {

LaneQuota lane_quota(std::uint64_t max_events, unsigned vcpus) {
  const std::uint64_t share = vcpus == 0 ? 0 : max_events / vcpus;
  return {static_cast<std::size_t>(share * 7 / 16), static_cast<std::size_t>(share / 4),
          static_cast<std::size_t>(std::max<std::uint64_t>(share / 16, 1))};
}

std::uint64_t max_events_to_hold(const LaneQuota& need, unsigned vcpus) {
  // Each share is max_events / vcpus; lane_quota gives a lane kind
  // share * num / den, so a share of ceil(n * den / num) holds n.
  const auto share_for = [](std::uint64_t n, std::uint64_t num, std::uint64_t den) { return (n * den + num - 1) / num; };
  const std::uint64_t share = std::max({share_for(need.vcpu_events, 7, 16), share_for(need.lock_records, 1, 4),
                                        share_for(need.host_events, 1, 16)});
  return share * vcpus;
}

void Trace::begin(unsigned vcpus, std::uint64_t origin_ns, std::span<const char* const> exit_names) {
  quota_ = lane_quota(options_.max_events, vcpus);
  origin_ns_ = origin_ns;
  exit_names_.assign(exit_names.begin(), exit_names.end());
  vcpu_lanes_.clear();
  host_lanes_.clear();
  lock_lanes_.clear();
  trackers_.assign(vcpus, PreemptionTracker{});
  for (unsigned i = 0; i < vcpus; ++i) {
    vcpu_lanes_.emplace_back(quota_.vcpu_events);
    host_lanes_.emplace_back(quota_.host_events);
    lock_lanes_.emplace_back(quota_.lock_records * 2);
  }
  metadata_["max_events"] = options_.max_events;
}

std::uint64_t Trace::dropped_events() const {
  std::uint64_t n = 0;
  for (unsigned i = 0; i < vcpus(); ++i)
    n += vcpu_lanes_[i].dropped() + host_lanes_[i].dropped() + lock_lanes_[i].dropped();
  return n;
}

LaneQuota Trace::most_needed() const {
  LaneQuota need{0, 0, 0};
  for (unsigned i = 0; i < vcpus(); ++i) {
    need.vcpu_events = std::max<std::size_t>(need.vcpu_events, vcpu_lanes_[i].events().size() + vcpu_lanes_[i].dropped());
    need.host_events = std::max<std::size_t>(need.host_events, host_lanes_[i].events().size() + host_lanes_[i].dropped());
    // Two slices per lock record.
    need.lock_records = std::max<std::size_t>(need.lock_records,
                                              (lock_lanes_[i].events().size() + lock_lanes_[i].dropped() + 1) / 2);
  }
  return need;
}

void Trace::on_kick(unsigned from, unsigned target, std::uint64_t flow, std::uint64_t sent_ns) noexcept {
  vcpu_lanes_[from].add({sent_ns, sent_ns, flow, target, EventKind::kKick});
}

void Trace::on_kick_consumed(unsigned vcpu, std::uint64_t flow) noexcept {
  const std::uint64_t t = now_ns();
  vcpu_lanes_[vcpu].add({t, t, flow, 0, EventKind::kWake});
}

}  // namespace lockvisor::trace
