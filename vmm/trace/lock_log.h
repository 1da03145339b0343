// The lock-trace log in guest memory (lockvisor/abi/lock_trace.h): where it
// goes, and turning it into lock-lane slices after the run.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "locks/lock_events.h"

#include "vmm/trace/trace.h"
#include "vmm/trace/trace_clock.h"

namespace lockvisor::trace {

// Where the log blocks go: the top of the guest's free memory, at most half
// of it. `stride` 0: no room (no lock lane).
struct LockLogPlacement {
  std::uint64_t gpa = 0;
  std::uint64_t stride = 0;    // bytes per vCPU block (header + records)
  std::uint64_t capacity = 0;  // records per vCPU
};
LockLogPlacement place_lock_log(std::uint64_t free_start, std::uint64_t free_end, unsigned vcpus,
                                std::size_t records_wanted);

// place_lock_log's inverse: the free guest memory (free_end - free_start)
// whose share holds `records` per vCPU for `vcpus` vCPUs.
std::uint64_t lock_log_free_bytes_for(std::uint64_t records, unsigned vcpus);

// Writes each block's header (magic, capacity; counts zero).
void init_lock_log(std::span<std::byte> memory, const LockLogPlacement& place, unsigned vcpus);

struct LockLogStats {
  std::uint64_t records = 0;   // accepted
  std::uint64_t dropped = 0;   // the guest's count of acquisitions its full log did not keep
  std::uint64_t rejected = 0;  // records that failed a check (never in the trace)
  std::uint64_t clamped = 0;   // records kept with times moved into the window (within the slack)
  // Accepted records by acquisition path (locks::AcqPath), and those whose
  // path code is none the VMM knows (drawn with path kInvalidPath).
  std::array<std::uint64_t, locks::kAcqPathCount> by_path{};
  std::uint64_t invalid_path = 0;
};

// Reads every vCPU's block after the run, trusting nothing in it: count is
// clamped to the VMM's own capacity, a record must name a lock slot below
// `max_lock`, have arrive <= acquired <= released, and map inside
// [window_begin_ns, window_end_ns] through its vCPU's clock (clocks[i]:
// each vCPU has its own TSC offset). Good records become a wait and a hold
// slice on the vCPU's lock lane, both with the record's path; an unknown
// path code keeps the record (its times passed) as path kInvalidPath.
//
// `slack_ns` is the conversion's own error (how far a vCPU's TSC offset
// moved during the run: KVM moves it when the host's TSC is unstable, as in
// a nested machine). A record that maps outside the window by no more than
// the slack is an honest record the conversion misplaced: it is kept, its
// times clamped into the window (clamping keeps their order), and counted
// as `clamped`. Beyond the slack it is rejected.
LockLogStats read_lock_log(std::span<const std::byte> memory, const LockLogPlacement& place,
                           std::span<const GuestClock> clocks, std::uint64_t window_begin_ns,
                           std::uint64_t window_end_ns, std::uint64_t slack_ns, std::uint32_t max_lock,
                           Trace& trace);

}  // namespace lockvisor::trace
