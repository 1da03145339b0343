// The summary's section on the NUMA locks' bounds: for every point whose
// lock states a bypass bound in its header (cna, pvcna, hq, pvhq:
// vmm/trace/numa_bound_check.h), the bound with the point's --param values
// beside the longest wait its runs measured.
//
// The bound limits each run of consecutive handoffs to one other node while
// a waiter waits, not the wait itself: with k nodes a wait may span k - 1
// such runs plus the waiter's own node's queue ahead of it. So the section
// sets the two side by side and says so; whether a run went over the bound
// is judged from a trace (`lockvisor trace-check`, docs/vnuma.md).
#pragma once
#include <string>

#include "vmm/lab/lab_summary.h"
#include "vmm/lab/settings.h"

namespace lockvisor::lab {

// "" when no point runs such a lock.
std::string numa_bounds_markdown(const Summary& summary);

}  // namespace lockvisor::lab
