// Benchmarks measured by the guest itself, side by side in one run.
//   bench-doorbell: a doorbell hypercall round trip (an unknown number,
//     which goes through the whole dispatch and returns -KVM_ENOSYS) against
//     a bare PIO exit to the VMM, interleaved in batches so that machine
//     noise hits both alike. Reports per-operation TSC cycles per batch.
#include "programs/programs.h"
#include "runtime/boot.h"
#include "runtime/check.h"
#include "runtime/cpu.h"
#include "runtime/doorbell.h"
#include "runtime/pv.h"

namespace guest {
namespace {
constexpr u64 kMaxBatches = 2048;
u64 g_doorbell_cycles[kMaxBatches];
u64 g_bare_exit_cycles[kMaxBatches];
}  // namespace

void program_bench_doorbell() {
  if (this_cpu() != 0) return;
  const u64 batches = arg_u64("batches", 200);
  const u64 per_batch = arg_u64("per_batch", 20);
  LV_CHECK_LE(batches, kMaxBatches);
  LV_CHECK_GT(per_batch, 0u);
  for (u64 b = 0; b < batches; ++b) {
    u64 t0 = rdtsc();
    for (u64 i = 0; i < per_batch; ++i) LV_CHECK_EQ(kvm_hypercall(0x4c56ffff), kKvmEnosys);
    u64 t1 = rdtsc();
    for (u64 i = 0; i < per_batch; ++i) nop_exit();
    u64 t2 = rdtsc();
    g_doorbell_cycles[b] = (t1 - t0) / per_batch;
    g_bare_exit_cycles[b] = (t2 - t1) / per_batch;
  }
  report_array("doorbell_cycles", g_doorbell_cycles, batches, ResultKind::kTscCycles);
  report_array("bare_exit_cycles", g_bare_exit_cycles, batches, ResultKind::kTscCycles);
}

}  // namespace guest
