// Where a lock's time went in a traced run (`lockvisor trace-check`, after
// the bound oracle): how much of the traced span it was held, and how much
// it sat free before each kind of acquisition (by path); and for the long
// free gaps (a lock that is free while someone waits for it costs every
// waiter), what the vCPU that finally took it was doing meanwhile and what
// all the other vCPUs were doing. That is the evidence a lock's throughput
// floor needs: "the lock sat free 40 % of the run before reserved handoffs,
// the reserved head was parked for 80 % of that time and every other vCPU
// was halted in the queue behind it" is the FIFO convoy, read off the trace.
//
// Per path (how each acquisition was made: fast, steal, queue, reserved,
// borrow, ...): how many, the handoff latency of each (the previous hold's
// release to this acquisition, 0 when they touch or overlap: the acquirer
// was spinning on the word), and what the acquirer was doing during those
// latencies and during its whole waits. For `queue` and `reserved` the
// acquirer is the queue head, so that is what the head does while the lock
// is free for it: running guest code (spinning), halted, preempted by the
// host, in a VMM exit.
//
// Gaps are measured between consecutive holds of one lock, in acquisition
// order, over the part of the run every lock lane kept (a lane that filled
// up ends the span). Whether anyone was waiting during a gap is not asked:
// lockbench's vCPUs always are, within a few hundred nanoseconds.
#pragma once
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "locks/lock_events.h"
#include "vmm/trace/trace_reader.h"

namespace lockvisor::trace {

// What a vCPU can be doing at a given time, by the trace's vCPU lanes.
enum class VcpuActivity : std::uint8_t { kGuest, kHalted, kParked, kPreempted, kExit, kOther, kCount };
inline constexpr unsigned kVcpuActivities = static_cast<unsigned>(VcpuActivity::kCount);
const char* activity_name(VcpuActivity a);

// One path's acquisitions of one lock.
struct PathTime {
  std::uint64_t acquisitions = 0;
  // Handoff latencies (every acquisition but the lock's first): count,
  // median, 99th percentile (nearest rank) and largest.
  std::uint64_t handoffs = 0;
  std::uint64_t handoff_p50_ns = 0, handoff_p99_ns = 0, handoff_max_ns = 0;
  // The acquirer during its handoff latencies, and during its waits (arrive
  // to acquired; `waits` of them, `wait_ns` in all; a wait the file cut has
  // none).
  std::array<std::uint64_t, kVcpuActivities> handoff_activity_ns{};
  std::uint64_t waits = 0;
  std::uint64_t wait_ns = 0;
  std::array<std::uint64_t, kVcpuActivities> wait_activity_ns{};
};

struct LockTime {
  std::uint32_t lock = 0;
  std::uint64_t span_ns = 0;     // first acquisition to the last release kept
  std::uint64_t acquisitions = 0;
  std::uint64_t held_ns = 0;     // the span less its free gaps
  // Index kAcqPathCount: a path the VMM does not know.
  std::array<std::uint64_t, locks::kAcqPathCount + 1> free_before_ns{};
  std::array<std::uint64_t, locks::kAcqPathCount + 1> gaps{};
  // Gaps of at least long_gap_ns: their total, and how the acquirer and the
  // other vCPUs (summed over vCPUs, so shares are of vcpus-1 times the
  // total) spent them.
  std::uint64_t long_gap_ns = 0;
  std::uint64_t long_gaps = 0;
  std::uint64_t long_total_ns = 0;
  std::array<std::uint64_t, locks::kAcqPathCount + 1> long_by_path_ns{};
  std::array<std::uint64_t, kVcpuActivities> acquirer_ns{};
  std::array<std::uint64_t, kVcpuActivities> others_ns{};
  std::array<PathTime, locks::kAcqPathCount + 1> paths{};
};

// One entry per lock with at least two complete acquisitions in the file.
std::vector<LockTime> lock_time(const TraceTimeline& t, std::uint64_t long_gap_ns);

std::string format_lock_time(const std::vector<LockTime>& locks);
// The same, for trace-check's --json (docs/trace.md, "trace-check's JSON").
nlohmann::json lock_time_json(const std::vector<LockTime>& locks);

}  // namespace lockvisor::trace
