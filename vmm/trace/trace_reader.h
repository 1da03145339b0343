// Reading a timeline back from a trace file (`run --trace FILE`,
// docs/trace.md), for the checks that judge a traced run after the fact
// (`lockvisor trace-check`, bound_check.h).
//
// The file is the writer's Chrome trace JSON (trace_writer.h); it is parsed
// event by event (a whole-run trace is hundreds of MB of JSON), keeping what
// the checks need: every acquisition of the lock lanes (a wait and its hold
// joined back into one record, with its path), and per vCPU when it ran
// guest code and why not (host preemption, PV halt, VMM exit, park), the
// kicks sent to it, and where each lane stopped keeping events. Times are
// nanoseconds since the run's origin, as the file's `ts`.
//
// A file is input, not trusted: anything no run could have written (not
// JSON, traceEvents that are no array of the writer's events, a time before
// the origin, an unknown path, lock slices the metadata's counts disagree
// with, an event written twice, a run parameter the run refuses) is a
// one-line usage error naming the file, the event's index or the metadata
// key, and the value, clipped (docs/trace.md, "What trace-check refuses").
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace lockvisor::trace {

struct Span {
  std::uint64_t begin_ns = 0;
  std::uint64_t end_ns = 0;
};

// One acquisition. `arrive_ns` is absent when the file kept only its hold
// (a window cut its wait), `released_ns` when it kept only the wait.
struct TracedAcquisition {
  unsigned vcpu = 0;
  std::uint32_t lock = 0;
  std::optional<std::uint64_t> arrive_ns;
  std::uint64_t acquired_ns = 0;
  std::optional<std::uint64_t> released_ns;
  std::uint8_t path = 0;  // locks::AcqPath, or kInvalidPath (trace_buffer.h) for a name the VMM does not know
};

struct TracedVcpu {
  std::vector<Span> guest;               // inside KVM_RUN
  std::vector<Span> preempted;           // runnable but off its host CPU (host lane)
  std::vector<Span> halted;              // blocked in the PV halt
  std::vector<Span> exits;               // handling a VMM exit (halts nest inside)
  std::vector<Span> parked;              // held out of the guest by the VMM (injector, control socket)
  std::vector<std::uint64_t> kicked_ns;  // kicks sent to this vCPU (flow starts naming it)
  // A lane that hit its cap (or whose guest log was full) knows nothing
  // after this time.
  std::optional<std::uint64_t> vcpu_lane_until;
  std::optional<std::uint64_t> lock_lane_until;
};

struct TraceTimeline {
  unsigned vcpus = 0;
  std::uint64_t begin_ns = 0;  // what the file covers: its window, else the whole run
  std::uint64_t end_ns = 0;
  bool windowed = false;
  std::vector<TracedAcquisition> acquisitions;  // every lock lane, in file order
  std::vector<TracedVcpu> vcpu;
  std::uint64_t merged_slices = 0;  // --trace-merge-short "acquisitions" slices: individual records lost
  nlohmann::json metadata;          // the file's metadata object
  std::string file;                 // the file's name, for messages
};

// Throws a usage lockvisor::Error for a file that cannot be read or is not
// a lockvisor trace.
TraceTimeline read_trace_file(const std::string& path);
TraceTimeline read_trace_json(std::istream& in, const std::string& name);

}  // namespace lockvisor::trace
