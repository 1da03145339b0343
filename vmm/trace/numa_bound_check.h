// The NUMA locks' bound oracle (`lockvisor trace-check FILE` on a run of
// cna, pvcna, hq or pvhq): every wait's bypasses by vCPUs of other nodes,
// judged against the bound the lock's header states (guest/locks/cna.h,
// hq.h: "BOUND"; docs/vnuma.md).
//
// A bypass of waiter W is an acquisition B of W's lock by a vCPU of another
// node that arrived after W (B.arrive > W.arrive) and took the lock while W
// waited (W.arrive < B.acquired < W.acquired). Consecutive bypasses of W by
// vCPUs of one node are a RUN: the lock kept handing off within that node
// while W waited. The headers promise, per run:
//   holders  at most the handoff threshold (cna_threshold, or
//            hq_fairness_threshold plus one qspinlock-mode holder per vCPU
//            of that node, which may have queued globally before W's node);
//   time     with the time form on (cna_threshold_us,
//            hq_fairness_threshold_us): the run's second-to-last holder,
//            whose handoff decided to go on, acquired less than the time
//            threshold (plus `slack_ns`, the guest clock's and the stamp's
//            error) after its first: the run's clock started no later.
// Steals (pvcna's hybrid trylock while a head is halted, pvhq's of the
// global pvqspinlock) are counted in a run but not judged by it: a run with
// a steal is judged on its other holders only. The trace's arrival is
// stamped before the lock's enqueue, so a run over the bound while the
// waiter was off its CPU (preempted or parked) before the run ended is not
// judged either (`explained`): the waiter may not have queued yet. A wait is
// judged only when every lock lane is complete until it ended.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vmm/trace/trace_reader.h"

namespace lockvisor::trace {

struct NumaBoundRules {
  std::string lock;                  // the registry name; judged only for the NUMA locks
  bool judged = false;               // a NUMA lock and a topology (metadata.vcpu_node)
  std::uint64_t holders = 0;         // the handoff threshold
  bool per_node_extra = false;       // hq: plus one holder per vCPU of the run's node
  // cna/pvcna: a fast-path acquisition means the waiter had not queued (the
  // word had no tail); runs before it are not judged.  (hq's local
  // handoffs count no path event and read as fast.)
  bool fast_means_unqueued = false;
  std::uint64_t time_ns = 0;         // the time threshold, 0: off
  std::uint64_t slack_ns = 20000;    // clock conversion and stamp error
  std::vector<unsigned> vcpu_node;   // the run's topology (empty: none)
};

// Whether `lock` is one of the NUMA locks whose header states a bypass
// bound (cna, pvcna, hq, pvhq).
bool states_numa_bound(std::string_view lock);

// The bound `lock`'s header promises with these key=value parameters (the
// run's --param values; a key not given keeps pvbounded_tuning.h's
// default). No topology: `judged` stays false.
NumaBoundRules numa_bound_rules(std::string_view lock, const std::vector<std::pair<std::string, std::string>>& params);

// The lock and its thresholds as the traced run had them (metadata.args),
// the topology from metadata.vcpu_node.
NumaBoundRules numa_bound_rules_from(const nlohmann::json& metadata);

// "runs of at most N holders[ (plus one per vCPU of the node)][ or T us]".
std::string promised_bound_text(const NumaBoundRules& rules);

struct NumaRun {
  std::size_t wait = 0;        // TraceTimeline::acquisitions index of W
  std::size_t first = 0, last = 0;  // its first and last bypass (acquisitions indexes)
  unsigned node = 0;           // the node of the run's holders
  std::uint64_t holders = 0;   // its bypasses (queue holders)
  std::uint64_t steals = 0;    // steals among them, not judged
  std::uint64_t decided_ns = 0;  // second-to-last holder's acquisition - first's (0: one holder)
  bool over_holders = false, over_time = false;
};

struct NumaBoundReport {
  NumaBoundRules rules;
  std::uint64_t waits = 0, checked = 0;
  std::uint64_t longest_wait_ns = 0;
  std::size_t longest_wait = 0;  // acquisitions index
  std::uint64_t runs = 0;
  std::uint64_t longest_run = 0;        // holders
  std::uint64_t longest_decided_ns = 0;
  std::vector<NumaRun> violations;      // runs over the bound, in file order
  std::uint64_t explained = 0;          // runs over it while the waiter was off its CPU (not judged)
};

NumaBoundReport check_numa_bound(const TraceTimeline& t, const NumaBoundRules& rules);

// A line per violating run (up to `shown`), then the summary: the longest
// wait and run beside the promised bound.
std::string format_numa_bound_report(const TraceTimeline& t, const NumaBoundReport& r, std::size_t shown);

}  // namespace lockvisor::trace
