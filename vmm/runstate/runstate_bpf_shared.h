/* What the run-state BPF program (vcpu_runstate.bpf.c, C) and its loader
 * (runstate_page.cpp, C++) agree on besides the guest-visible record layout
 * (lockvisor/abi/vcpu_runstate.h): the names of the maps and programs the
 * loader looks up, and the size of the thread table. Plain C. */
#ifndef LOCKVISOR_VMM_RUNSTATE_BPF_SHARED_H
#define LOCKVISOR_VMM_RUNSTATE_BPF_SHARED_H

#include "lockvisor/abi/vcpu_runstate.h"

/* BPF_MAP_TYPE_ARRAY, BPF_F_MMAPABLE: LOCKVISOR_RUNSTATE_MAX_VCPUS records of
 * struct lockvisor_vcpu_runstate, i.e. exactly LOCKVISOR_RUNSTATE_PAGES pages, mmapped by the VMM. */
#define LOCKVISOR_RUNSTATE_PAGE_MAP "runstate_page"
/* BPF_MAP_TYPE_HASH: global thread id (the kernel's task->pid, what gettid()
 * returns in the initial PID namespace) -> vCPU index. */
#define LOCKVISOR_RUNSTATE_THREAD_MAP "runstate_tids"
/* Room for every vCPU thread the pages describe and as many stale entries again. */
#define LOCKVISOR_RUNSTATE_MAX_THREADS (2 * LOCKVISOR_RUNSTATE_MAX_VCPUS)

/* BPF_MAP_TYPE_ARRAY, BPF_F_MMAPABLE, one entry per vCPU, VMM-only (never
 * given to the guest): the last LOCKVISOR_PREEMPTION_HISTORY_SLOTS finished
 * preemptions of each vCPU thread, [begin_ns, end_ns] on CLOCK_MONOTONIC
 * (bpf_ktime_get_ns). The program writes slot count % SLOTS, then bumps
 * count (a full barrier): a reader that loads count with acquire semantics
 * sees the slots below it written. The timeline (--trace) drains it: every
 * host preemption exact, also inside one long KVM_RUN. */
#define LOCKVISOR_RUNSTATE_HISTORY_MAP "runstate_history"
#define LOCKVISOR_PREEMPTION_HISTORY_SLOTS 256u /* a power of two: the verifier bounds the index by a mask */

struct lockvisor_preemption_interval {
  __UINT64_TYPE__ begin_ns;
  __UINT64_TYPE__ end_ns;
};

struct lockvisor_preemption_history {
  __UINT64_TYPE__ count; /* preemptions ever written; slot count % SLOTS is the next */
  __UINT64_TYPE__ reserved;
  struct lockvisor_preemption_interval slot[LOCKVISOR_PREEMPTION_HISTORY_SLOTS];
};

/* The same handler attached two ways: BTF-typed tracepoint (direct loads,
 * preferred) and raw tracepoint (probe reads), the fallback. */
#define LOCKVISOR_RUNSTATE_PROG_TP_BTF "runstate_tp_btf"
#define LOCKVISOR_RUNSTATE_PROG_RAW_TP "runstate_raw_tp"

/* task_struct.__state of a task that exits (include/linux/sched.h), stable
 * since Linux 4.14. Its thread id is then dropped from the thread map, so a
 * later thread that reuses the id is not taken for the vCPU. */
#define LOCKVISOR_RUNSTATE_TASK_DEAD 0x80u

#endif /* LOCKVISOR_VMM_RUNSTATE_BPF_SHARED_H */
