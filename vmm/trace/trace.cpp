#include "vmm/trace/trace.h"

#include <algorithm>

namespace lockvisor::trace {

LaneQuota lane_quota(std::uint64_t max_events, unsigned vcpus) {
  const std::uint64_t share = vcpus == 0 ? 0 : max_events / vcpus;
  return {static_cast<std::size_t>(share * 7 / 16), static_cast<std::size_t>(share / 4),
          static_cast<std::size_t>(std::max<std::uint64_t>(share / 16, 1))};
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

void Trace::on_kick(unsigned from, unsigned target, std::uint64_t flow, std::uint64_t sent_ns) noexcept {
  vcpu_lanes_[from].add({sent_ns, sent_ns, flow, target, EventKind::kKick});
}

void Trace::on_kick_consumed(unsigned vcpu, std::uint64_t flow) noexcept {
  const std::uint64_t t = now_ns();
  vcpu_lanes_[vcpu].add({t, t, flow, 0, EventKind::kWake});
}

}  // namespace lockvisor::trace
