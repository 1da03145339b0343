/* What the run-state BPF program (vcpu_runstate.bpf.c, C) and its loader
 * (runstate_page.cpp, C++) agree on besides the guest-visible record layout
 * (lockvisor/abi/vcpu_runstate.h): the names of the maps and programs the
 * loader looks up, and the size of the thread table. Plain C. */
#ifndef LOCKVISOR_VMM_RUNSTATE_BPF_SHARED_H
#define LOCKVISOR_VMM_RUNSTATE_BPF_SHARED_H

#include "lockvisor/abi/vcpu_runstate.h"

/* BPF_MAP_TYPE_ARRAY, BPF_F_MMAPABLE: LOCKVISOR_RUNSTATE_MAX_VCPUS records of
 * struct lockvisor_vcpu_runstate, i.e. exactly one page, mmapped by the VMM. */
#define LOCKVISOR_RUNSTATE_PAGE_MAP "runstate_page"
/* BPF_MAP_TYPE_HASH: global thread id (the kernel's task->pid, what gettid()
 * returns in the initial PID namespace) -> vCPU index. */
#define LOCKVISOR_RUNSTATE_THREAD_MAP "runstate_tids"
/* Room for every vCPU thread of one page and as many stale entries again. */
#define LOCKVISOR_RUNSTATE_MAX_THREADS (2 * LOCKVISOR_RUNSTATE_MAX_VCPUS)

/* The same handler attached two ways: BTF-typed tracepoint (direct loads,
 * preferred) and raw tracepoint (probe reads), the fallback. */
#define LOCKVISOR_RUNSTATE_PROG_TP_BTF "runstate_tp_btf"
#define LOCKVISOR_RUNSTATE_PROG_RAW_TP "runstate_raw_tp"

/* task_struct.__state of a task that exits (include/linux/sched.h), stable
 * since Linux 4.14. Its thread id is then dropped from the thread map, so a
 * later thread that reuses the id is not taken for the vCPU. */
#define LOCKVISOR_RUNSTATE_TASK_DEAD 0x80u

#endif /* LOCKVISOR_VMM_RUNSTATE_BPF_SHARED_H */
