// Points side by side (`lab --jobs N`): up to N points run at once, each on
// host CPUs no other running point uses, so that a host with room does the
// matrix in a fraction of the one-at-a-time time without two points sharing
// a CPU (they still share caches and memory bandwidth: docs/lab.md says what
// that changes).
//
// A point whose host CPUs came from a word (pcpus = "all", "4cpus", "1/2":
// vmm/lab/placement.h) needs only as many CPUs: it runs on the lowest free
// block of that size aligned as its planned CPUs are (k CPUs starting at a
// multiple of k rounded up to a power of two, counted in the host's usable
// CPUs), so that it keeps their place among the host's cores and caches, and
// its result records which. A point that names its CPUs (an explicit
// list, an explicit --vnuma map, VMs with their own CPUs) waits for exactly
// those; one without pcpus waits for the whole host. Points start in matrix
// order (a point that does not fit yet holds back the ones after it), so a lab
// stopped half-way still has whole matrices.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "vmm/lab/matrix.h"
#include "vmm/lab/point_runner.h"

namespace lockvisor::lab {

// Below this many usable CPUs the default is one point at a time: on 2 CPUs
// two points side by side leave no CPU for the VMMs' unpinned threads and
// the lab itself (docs/lab.md, measured); at or above it, half the CPUs.
inline constexpr unsigned kSideBySideMinCpus = 8;
unsigned default_jobs(std::size_t host_cpus);

// What a point needs: `count` CPUs anywhere (movable) or exactly `cpus`.
struct CpuDemand {
  bool movable = false;
  std::vector<int> cpus;  // the planned CPUs; movable: any `cpus.size()` free ones do
};
CpuDemand cpu_demand(const Point& p, const std::vector<int>& host_cpus);

// The point's `lockvisor run` arguments on `cpus` (its pcpus replaced when it
// was moved).
std::vector<std::string> arguments_on(const Point& p, const std::vector<int>& cpus);

// Runs `todo` (at most `jobs` at once, on disjoint CPUs of `host_cpus`):
// `run` on a worker thread per point with the point's arguments, `finished`
// on the calling thread as each ends, with the CPUs it ran on. Returns false
// when a stop signal ended the lab: the points still running then are
// waited for and not reported (they run again on --resume).
bool run_side_by_side(const std::vector<const Point*>& todo, const std::vector<int>& host_cpus, unsigned jobs,
                      const std::function<PointRun(const Point&, const std::vector<std::string>&)>& run,
                      const std::function<void(const Point&, const PointRun&, const std::vector<int>&)>& finished);

}  // namespace lockvisor::lab
