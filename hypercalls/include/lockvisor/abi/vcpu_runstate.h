/* The vCPU run-state page: one 4 KiB page the host writes and the guest
 * reads, with no exit on either side (docs/runstate.md).
 *
 * The host's scheduler publishes it: an eBPF program on sched_switch
 * (vmm/runstate/vcpu_runstate.bpf.c) updates the record of a vCPU every time
 * that vCPU's thread is switched in or out of a host CPU. The VMM maps the
 * page into the guest through a read-only memslot, so the guest can ask "is
 * vCPU n running right now?" with one load.
 *
 * It is a HINT. Time lost below the host kernel (its own hypervisor) is
 * invisible, and on some hosts a switch can fail to reach the program, so a
 * record can lag the truth by up to one host time slice. Locks may use it
 * to choose whom to spin on or hand off to, never for correctness.
 *
 * This header is plain C and C++ at once: the BPF program (C, clang -target
 * bpf), the VMM (hosted C++) and the guest (freestanding C++) include it.
 * Only the compiler's fixed-width builtins are used.
 *
 * ABI rules: a page of zeros reads "unknown" for every vCPU (state 0), so a
 * page the host never writes — no BPF privilege, no BTF, a VMM without the
 * option — can never say "running". Records only grow by taking reserved
 * space; existing fields never move.
 */
#ifndef LOCKVISOR_ABI_VCPU_RUNSTATE_H
#define LOCKVISOR_ABI_VCPU_RUNSTATE_H

#ifdef __cplusplus
#define LOCKVISOR_RUNSTATE_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define LOCKVISOR_RUNSTATE_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* LOCKVISOR_RUNSTATE_PAGES contiguous 4 KiB pages, one 64-byte record per
 * vCPU, indexed by vCPU index (= APIC ID in lockvisor): vCPU i's record is at
 * byte 64 * i. Sixteen pages describe 1024 vCPUs, the most a lockvisor VM has
 * (guest_layout.h kMaxVcpus, checked there). */
#define LOCKVISOR_RUNSTATE_PAGES 16u
#define LOCKVISOR_RUNSTATE_BYTES (LOCKVISOR_RUNSTATE_PAGES * 4096u)
#define LOCKVISOR_RUNSTATE_RECORD_SIZE 64u
#define LOCKVISOR_RUNSTATE_MAX_VCPUS (LOCKVISOR_RUNSTATE_BYTES / LOCKVISOR_RUNSTATE_RECORD_SIZE)

/* Values of lockvisor_vcpu_runstate.state. */
#define LOCKVISOR_RUNSTATE_UNKNOWN 0u   /* never written: no publisher, or no switch seen yet */
#define LOCKVISOR_RUNSTATE_RUNNING 1u   /* the vCPU thread is on a host CPU */
#define LOCKVISOR_RUNSTATE_PREEMPTED 2u /* switched out while still runnable (involuntary) */
#define LOCKVISOR_RUNSTATE_SLEEPING 3u  /* switched out blocked (halt, futex, I/O) or exited */

/* One vCPU's record, one cache line. Written only by the host.
 *
 * `state` alone is always a consistent value: one aligned 32-bit load is the
 * whole vcpu_is_preempted() test. To read several fields consistently use
 * `seq` as a seqlock: it is odd while the host updates the record and grows
 * by 2 per change (seq / 2 = changes so far); read seq, the fields, seq
 * again, and retry if the two differ or are odd.
 *
 * Times are the host's CLOCK_MONOTONIC in nanoseconds (bpf_ktime_get_ns),
 * not the guest's TSC. */
struct lockvisor_vcpu_runstate {
  __UINT32_TYPE__ seq;             /*  0: seqlock, odd while updating, +2 per change */
  __UINT32_TYPE__ state;           /*  4: LOCKVISOR_RUNSTATE_* */
  __UINT64_TYPE__ state_since_ns;  /*  8: when `state` last changed */
  __UINT64_TYPE__ preemptions;     /* 16: switched out while runnable */
  __UINT64_TYPE__ sleeps;          /* 24: switched out blocked */
  __UINT64_TYPE__ runs;            /* 32: switched in */
  __UINT64_TYPE__ preempted_ns;    /* 40: time spent preempted (intervals that ended) */
  __UINT32_TYPE__ host_cpu;        /* 48: host CPU of the last change */
  __UINT32_TYPE__ anomalies;       /* 52: switch-in while already running, or switch-out
                                    *     while not running: a switch the host never showed
                                    *     the program (the record lagged) */
  __UINT64_TYPE__ reserved;        /* 56: zero */
};

LOCKVISOR_RUNSTATE_STATIC_ASSERT(sizeof(struct lockvisor_vcpu_runstate) == LOCKVISOR_RUNSTATE_RECORD_SIZE,
                                 "a run-state record is one 64-byte cache line");
LOCKVISOR_RUNSTATE_STATIC_ASSERT(LOCKVISOR_RUNSTATE_MAX_VCPUS * LOCKVISOR_RUNSTATE_RECORD_SIZE ==
                                     LOCKVISOR_RUNSTATE_BYTES,
                                 "the records fill exactly the pages");
LOCKVISOR_RUNSTATE_STATIC_ASSERT(LOCKVISOR_RUNSTATE_UNKNOWN == 0, "a zero page must read unknown");

#ifdef __cplusplus
namespace lockvisor::abi {
using VcpuRunState = ::lockvisor_vcpu_runstate;
inline constexpr unsigned kRunStatePages = LOCKVISOR_RUNSTATE_PAGES;
inline constexpr unsigned kRunStateBytes = LOCKVISOR_RUNSTATE_BYTES;
inline constexpr unsigned kRunStateMaxVcpus = LOCKVISOR_RUNSTATE_MAX_VCPUS;
enum class RunState : __UINT32_TYPE__ {
  kUnknown = LOCKVISOR_RUNSTATE_UNKNOWN,
  kRunning = LOCKVISOR_RUNSTATE_RUNNING,
  kPreempted = LOCKVISOR_RUNSTATE_PREEMPTED,
  kSleeping = LOCKVISOR_RUNSTATE_SLEEPING,
};
static_assert(__builtin_offsetof(VcpuRunState, state) == 4);
static_assert(__builtin_offsetof(VcpuRunState, preemptions) == 16);
static_assert(__builtin_offsetof(VcpuRunState, host_cpu) == 48);
}  // namespace lockvisor::abi
#endif

#endif /* LOCKVISOR_ABI_VCPU_RUNSTATE_H */
