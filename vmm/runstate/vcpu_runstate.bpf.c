// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Publishes vCPU run state from the host scheduler: on every sched_switch
 * where the outgoing or incoming task is a registered vCPU thread, update
 * that vCPU's record in the mmapable page map (docs/runstate.md), and
 * append each finished preemption to the vCPU's history ring (VMM-only,
 * for the timeline).
 *
 * Built by vmm/runstate/CMakeLists.txt with
 * `clang -target bpf -O2 -g` and embedded into the VMM; CO-RE: the only
 * kernel type used, task_struct, is declared below with
 * preserve_access_index and relocated by libbpf against the running
 * kernel's BTF, so no vmlinux.h is generated.
 *
 * Needs Linux >= 5.18: sched_switch's fourth argument, prev_state. On older
 * kernels the verifier refuses the access and the page stays "unknown".
 *
 * Classification of the outgoing task, the kernel's own (__schedule()):
 * it is switched out involuntarily (counted in nivcsw, stays on the run
 * queue) when the switch is a preemption or its state is TASK_RUNNING; any
 * other state means it blocked (nvcsw). The one disagreement with nivcsw: a
 * task about to block that has a signal pending is put back to TASK_RUNNING
 * but counted as voluntary; here it counts as preempted, which is what it is
 * (runnable, not running). */
#include <linux/bpf.h>

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "vmm/runstate/runstate_bpf_shared.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* CO-RE: only the field we read; libbpf finds its offset in vmlinux BTF. */
struct task_struct {
  int pid;
} __attribute__((preserve_access_index));

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, LOCKVISOR_RUNSTATE_MAX_VCPUS);
  __type(key, __u32);
  __type(value, struct lockvisor_vcpu_runstate);
} runstate_page SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, LOCKVISOR_RUNSTATE_MAX_THREADS);
  __type(key, __u32);
  __type(value, __u32);
} runstate_tids SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, LOCKVISOR_RUNSTATE_MAX_VCPUS);
  __type(key, __u32);
  __type(value, struct lockvisor_preemption_history);
} runstate_history SEC(".maps");

static __always_inline struct lockvisor_vcpu_runstate* record_of(__u32 tid, __u32* index) {
  if (tid == 0) return 0; /* the idle tasks */
  __u32* vcpu = bpf_map_lookup_elem(&runstate_tids, &tid);
  if (!vcpu) return 0;
  *index = *vcpu;
  return bpf_map_lookup_elem(&runstate_page, index);
}

/* A preemption that just ended: into the vCPU's history ring. One writer
 * per vCPU (its own switch-in), like the record. */
static __always_inline void remember(__u32 index, __u64 begin, __u64 end) {
  struct lockvisor_preemption_history* h = bpf_map_lookup_elem(&runstate_history, &index);
  if (!h) return;
  __u64 n = h->count;
  struct lockvisor_preemption_interval* slot = &h->slot[n & (LOCKVISOR_PREEMPTION_HISTORY_SLOTS - 1)];
  slot->begin_ns = begin;
  slot->end_ns = end;
  __sync_fetch_and_add(&h->count, 1);
}

/* Seqlock write: seq goes odd, the fields change, seq goes even. The atomic
 * adds are full barriers (lock xadd on x86), so a reader on another CPU that
 * sees an even, unchanged seq around its reads saw one consistent record.
 * There is one writer per record: a task's switch-out always completes
 * before any CPU can switch it in again. */
static __always_inline void change(struct lockvisor_vcpu_runstate* r, __u32 index, __u32 to, __u64 now, __u32 cpu) {
  __u32 from = r->state;
  __u64 since = r->state_since_ns;
  __sync_fetch_and_add(&r->seq, 1);
  if (from == LOCKVISOR_RUNSTATE_PREEMPTED && now > since) r->preempted_ns += now - since;
  if (to == LOCKVISOR_RUNSTATE_RUNNING) {
    if (from == LOCKVISOR_RUNSTATE_RUNNING) r->anomalies += 1; /* the switch-out was never seen */
    r->runs += 1;
  } else {
    if (from != LOCKVISOR_RUNSTATE_RUNNING && from != LOCKVISOR_RUNSTATE_UNKNOWN)
      r->anomalies += 1; /* the switch-in was never seen */
    if (to == LOCKVISOR_RUNSTATE_PREEMPTED)
      r->preemptions += 1;
    else
      r->sleeps += 1;
  }
  r->state = to;
  r->state_since_ns = now;
  r->host_cpu = cpu;
  __sync_fetch_and_add(&r->seq, 1);
  if (from == LOCKVISOR_RUNSTATE_PREEMPTED && to == LOCKVISOR_RUNSTATE_RUNNING && now > since) remember(index, since, now);
}

static __always_inline int on_switch(_Bool preempt, __u32 prev_tid, __u32 next_tid, unsigned int prev_state) {
  __u32 out_index = 0, in_index = 0;
  struct lockvisor_vcpu_runstate* out = record_of(prev_tid, &out_index);
  struct lockvisor_vcpu_runstate* in = record_of(next_tid, &in_index);
  /* Tested one by one: the verifier refuses `out || in` compiled to an OR
   * of two map-value pointers. */
  __u64 now = 0;
  __u32 cpu = 0;
  if (out) {
    now = bpf_ktime_get_ns();
    cpu = bpf_get_smp_processor_id();
    _Bool runnable = preempt || prev_state == 0; /* TASK_RUNNING */
    change(out, out_index, runnable ? LOCKVISOR_RUNSTATE_PREEMPTED : LOCKVISOR_RUNSTATE_SLEEPING, now, cpu);
    if (!runnable && (prev_state & LOCKVISOR_RUNSTATE_TASK_DEAD)) bpf_map_delete_elem(&runstate_tids, &prev_tid);
  }
  if (in) {
    if (now == 0) {
      now = bpf_ktime_get_ns();
      cpu = bpf_get_smp_processor_id();
    }
    change(in, in_index, LOCKVISOR_RUNSTATE_RUNNING, now, cpu);
  }
  return 0;
}

/* At sched_switch the current task is still `prev`: its id comes from
 * bpf_get_current_pid_tgid() (low half = the kernel's pid = thread id). */
SEC("tp_btf/sched_switch")
int BPF_PROG(runstate_tp_btf, _Bool preempt, struct task_struct* prev, struct task_struct* next,
             unsigned int prev_state) {
  (void)ctx;
  (void)prev;
  return on_switch(preempt, (__u32)bpf_get_current_pid_tgid(), (__u32)next->pid, prev_state);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(runstate_raw_tp, _Bool preempt, struct task_struct* prev, struct task_struct* next,
             unsigned int prev_state) {
  (void)ctx;
  (void)prev;
  return on_switch(preempt, (__u32)bpf_get_current_pid_tgid(), (__u32)BPF_CORE_READ(next, pid), prev_state);
}
