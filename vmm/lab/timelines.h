// The lab's timelines (scenario [timeline], docs/lab.md): after the matrix,
// one traced run per matrix cell the [timeline] table selects, kept in
// OUT/timelines/ (the trace, windowed on the run's longest lock wait, and
// its swimlane PNG), recorded in OUT/timelines.jsonl like results.jsonl
// (appended whole, fsync'd; --resume runs only the missing ones), and shown
// in report.md next to the worst wait the measured runs of that cell saw.
//
// The traced run is an extra run, not one of the measured ones: the lock
// log costs a store per acquisition, and the measured numbers stay
// untouched by it. Its worst wait is that run's, which the report says.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "vmm/lab/matrix.h"
#include "vmm/lab/scenario.h"
#include "vmm/lab/lab_summary.h"
#include "vmm/lab/timeline_check.h"

namespace lockvisor::lab {

inline constexpr const char* kTimelinesLog = "timelines.jsonl";
inline constexpr const char* kTimelinesDir = "timelines";

// What the traced run of a cell asks of `lockvisor run` beyond the point's
// own settings: guest memory and an event cap that hold every acquisition
// of a kMaxTimelineSeconds run at these machines' rates.
inline constexpr unsigned kTimelineMemoryMib = 2048;
inline constexpr unsigned long long kTimelineMaxEvents = 64000000;
// Lock slices shorter than this, back to back, are one slice in the file
// (--trace-merge-short): at a picture's scale they are one bar anyway, and a
// fast lock's millions of 100 ns acquisitions would make the file GiBs. Not
// for a lock that trace-check judges (pvbounded; a NUMA lock with a virtual
// topology): its verdict needs every acquisition, and its worst waits are
// short, so its window holds few.
inline constexpr const char* kTimelineMergeShort = "10us";

// What the report makes from a timeline's trace (its swimlane, trace-check's
// JSON and text), by the extension that replaces the trace's: made again
// whenever the trace is.
inline constexpr const char* kSwimlaneExtension = ".png";
inline constexpr const char* kMadeFromTrace[] = {kSwimlaneExtension, kCheckJsonExtension, kCheckTextExtension};

struct TimelinePlan {
  std::string id;    // the cell's key + "#timeline"
  std::string key;   // the cell (Point::key)
  std::vector<std::pair<std::string, std::string>> labels;
  std::string name;  // file stem in OUT/timelines/
  std::vector<std::string> args;  // `lockvisor run` arguments, with --trace
  double duration_s = 0;
};

// The cells of `scenario` that get a timeline, among `mine` (this shard's
// points: a cell belongs to the shard that runs its first repeat). Native
// twins have none (no VM to trace). `dir` is the lab directory.
std::vector<TimelinePlan> plan_timelines(const Scenario& scenario, const std::vector<Point>& mine,
                                         const std::string& dir);

// Runs the planned timelines that OUT/timelines.jsonl does not have yet.
// Returns false when a stop signal ended it (the rest run on --resume).
bool run_timelines(const std::vector<TimelinePlan>& plans, const std::string& dir, const std::string& lockvisor);

// Draws the swimlanes still missing (tools/trace-swimlane.py) and returns
// report.md's section about the timelines ("" when the scenario has none).
std::string timelines_section(const Scenario& scenario, const Summary& summary, const std::string& dir,
                              std::optional<double> host_slice_ns);

}  // namespace lockvisor::lab
