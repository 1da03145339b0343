// The timeline of one run (--trace FILE, docs/trace.md): every lane's
// buffer, allocated before the first vCPU starts, and what the file's
// metadata says about how each lane was obtained.
//
// Lanes (one buffer each, one writer thread each):
//   vCPU lane i   the vCPU thread: KVM_RUN (guest), exits by kind, halts,
//                 parks, kicks sent and consumed (the PV backend calls the
//                 KickObserver side on the same threads);
//   host lane i   intervals the vCPU thread was preempted by the host
//                 scheduler: written by the vCPU thread from its run-state
//                 record (PreemptionTracker), or without a live page by the
//                 schedstat sampler on the monitor thread (never both);
//   lock lane i   filled after the run from the guest's lock-trace log.
// The event cap (TraceOptions::max_events) is shared out when the lanes are
// allocated; every lane counts what it could not keep.
#pragma once
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vmm/pvlock/pv_backend.h"
#include "vmm/trace/preemption_tracker.h"
#include "vmm/trace/trace_buffer.h"
#include "vmm/trace/trace_clock.h"

namespace lockvisor::trace {

struct TraceOptions {
  std::uint64_t max_events = 4000000;  // --trace-max-events
  // --trace-merge-short: lock slices shorter than this, back to back, are
  // written as one "acquisitions" slice (0: every slice as it is).
  std::uint64_t merge_short_ns = 0;
};

// How the cap is shared per vCPU: 7/16 to the exit loop, a quarter as lock
// records (two slices each: 8/16), 1/16 to the host lane.
struct LaneQuota {
  std::size_t vcpu_events;
  std::size_t lock_records;
  std::size_t host_events;
};
LaneQuota lane_quota(std::uint64_t max_events, unsigned vcpus);
// lane_quota's inverse: the smallest cap whose shares hold `need` in each of
// `vcpus` vCPUs' lanes.
std::uint64_t max_events_to_hold(const LaneQuota& need, unsigned vcpus);

class Trace final : public pvlock::KickObserver {
 public:
  explicit Trace(TraceOptions options) : options_(options) {}

  // Allocates the lanes (once, before the vCPUs start). `exit_names`
  // names EventKind::kExit's arg values; `origin` is the run's time zero.
  void begin(unsigned vcpus, std::uint64_t origin_ns, std::span<const char* const> exit_names);

  const TraceOptions& options() const { return options_; }
  unsigned vcpus() const { return static_cast<unsigned>(vcpu_lanes_.size()); }
  std::uint64_t origin_ns() const { return origin_ns_; }
  std::size_t lock_records_per_vcpu() const { return quota_.lock_records; }
  std::span<const char* const> exit_names() const { return exit_names_; }

  TraceBuffer& vcpu_lane(unsigned vcpu) { return vcpu_lanes_[vcpu]; }
  TraceBuffer& host_lane(unsigned vcpu) { return host_lanes_[vcpu]; }
  TraceBuffer& lock_lane(unsigned vcpu) { return lock_lanes_[vcpu]; }
  const TraceBuffer& vcpu_lane(unsigned vcpu) const { return vcpu_lanes_[vcpu]; }
  const TraceBuffer& host_lane(unsigned vcpu) const { return host_lanes_[vcpu]; }
  const TraceBuffer& lock_lane(unsigned vcpu) const { return lock_lanes_[vcpu]; }
  // Events every lane could not keep (the file's metadata.dropped_events).
  std::uint64_t dropped_events() const;
  // What every lane was handed in this run, kept or dropped: the most of any
  // one vCPU per lane kind (lock lanes in records, two slices each); after
  // the guest's lock log was read (its drops count).  max_events_to_hold()
  // of it is the cap that would have kept the whole run.
  LaneQuota most_needed() const;
  // The vCPU thread's own reader of its run-state record (host lane).
  PreemptionTracker& preemptions(unsigned vcpu) { return trackers_[vcpu]; }
  const PreemptionTracker& preemptions(unsigned vcpu) const { return trackers_[vcpu]; }

  // The file's "metadata" object: how each lane was obtained, the clock,
  // the measured TSC error, drops. Written by the monitor thread only.
  nlohmann::json& metadata() { return metadata_; }
  const nlohmann::json& metadata() const { return metadata_; }

  // pvlock::KickObserver, on vCPU threads.
  void on_kick(unsigned from, unsigned target, std::uint64_t flow, std::uint64_t sent_ns) noexcept override;
  void on_kick_consumed(unsigned vcpu, std::uint64_t flow) noexcept override;

 private:
  TraceOptions options_;
  LaneQuota quota_{};
  std::uint64_t origin_ns_ = 0;
  std::vector<const char*> exit_names_;
  std::vector<TraceBuffer> vcpu_lanes_, host_lanes_, lock_lanes_;
  std::vector<PreemptionTracker> trackers_;
  nlohmann::json metadata_ = nlohmann::json::object();
};

}  // namespace lockvisor::trace
