// The host side of the vCPU run-state page (docs/runstate.md): loads the
// sched_switch BPF program embedded in this binary, attaches it, and maps the
// page it writes. The VMM registers each vCPU thread, hands page() to KVM as
// a read-only memslot, and the guest reads each vCPU's state with no exit.
//
// Everything is owned: destroying a RunStatePage detaches the program,
// unmaps the page and closes every BPF object. When the program cannot load
// (no BPF privilege, no BTF, a kernel before 5.18, a verifier refusal),
// open() throws lockvisor::Error of kind kHost with the reason; the VMM then
// maps a page of zeros, which reads "unknown" for every vCPU.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "lockvisor/abi/vcpu_runstate.h"
#include "vmm/runstate/runstate_bpf_shared.h"
#include "vmm/util/mapping.h"

namespace lockvisor::runstate {

// Whether the page can be published on this host, and why not (doctor).
struct ProbeResult {
  bool ok = false;
  std::string detail;  // ok: how it attached ("tp_btf/sched_switch"); else the reason
};

// The kernel-side counters of the attached program (bpf_prog_info).
struct ProgramStats {
  std::uint64_t recursion_misses = 0;  // runs skipped because a BPF program was already running on that CPU
  std::uint64_t run_count = 0;         // only counted while kernel.bpf_stats_enabled = 1
  std::uint64_t run_time_ns = 0;       // idem
};

// How the program attaches to sched_switch: a BTF-typed tracepoint (direct
// loads; preferred) or a raw tracepoint (probe reads); kAuto tries tp_btf,
// then raw_tp if the kernel refuses it.
enum class Attach { kAuto, kTpBtf, kRawTp };

class RunStatePage {
 public:
  // Loads, attaches and maps, for vCPU indexes 0..max_vcpus-1 (at most
  // abi::kRunStateMaxVcpus = 1024, abi::kRunStatePages pages). Throws Error (kHost) with the
  // reason when this host cannot, Error (kUsage) for a bad max_vcpus.
  static RunStatePage open(unsigned max_vcpus, Attach attach = Attach::kAuto);

  // The same page, from a program loaded once and kept pinned in bpffs for
  // the runs that follow (runstate_pool.h): the first run loads and pins it,
  // later ones lease it, zero its maps and attach it, in well under a
  // millisecond instead of tens. Falls back to open()'s own load when no
  // slot can be leased. The page reads exactly as open()'s does; only the
  // program (and its ids) outlives this object, detached.
  static RunStatePage open_shared(unsigned max_vcpus);
  // Whether this page's program came from (and returns to) the pool.
  bool pooled() const;

  // Tries open() and closes again.
  static ProbeResult probe();

  // Why open() would certainly fail for `max_vcpus` vCPUs on this host (bad
  // count, no BTF, no BPF privilege), or empty when it may succeed: checks
  // of microseconds, made before loading elsewhere. (A child PID namespace
  // is found by open() itself.)
  static std::string why_unavailable(unsigned max_vcpus);

  // Maps the pages over `view` (kRunStateBytes, e.g. the zeros a read-only
  // memslot already shows the guest) and takes that range over: on return
  // `view` is empty, page() is view's old address, and the first mapping is
  // gone. The range reads zeros or the page at every instant, never
  // neither. Throws Error (kHost) and leaves `view` mapped (zeros) when the
  // kernel refuses.
  void take_view(Mapping& view);

  // Movable; a moved-from page may only be destroyed or assigned to.
  RunStatePage(RunStatePage&&) noexcept;
  RunStatePage& operator=(RunStatePage&&) noexcept;
  RunStatePage(const RunStatePage&) = delete;
  RunStatePage& operator=(const RunStatePage&) = delete;
  ~RunStatePage();

  // Publishes the state of thread `tid` (a global thread id: gettid() of a
  // process in the initial PID namespace) as vCPU `vcpu`. The record reads
  // "unknown" until the thread's next context switch, so register a vCPU
  // thread before it first runs guest code; its counters keep counting from
  // wherever a previous thread of that vCPU left them. A thread that exits is
  // dropped by the program itself; re-registering a tid moves it.
  void register_thread(pid_t tid, unsigned vcpu);
  void unregister_thread(pid_t tid);
  // The thread table as the program sees it: (tid, vCPU), in no order.
  std::vector<std::pair<pid_t, unsigned>> registered_threads() const;

  // The page, page-aligned and mapped PROT_READ (it cannot be made writable:
  // the kernel refuses mprotect). Give page().data() to
  // KVM_SET_USER_MEMORY_REGION with KVM_MEM_READONLY. Valid while *this lives.
  std::span<const std::byte> page() const;
  const abi::VcpuRunState* records() const;
  unsigned max_vcpus() const;

  // vCPU `vcpu`'s ring of finished preemptions (runstate_bpf_shared.h:
  // written by the program at each switch-in, VMM-only), or nullptr when
  // it could not be mapped (the page works without it).
  const lockvisor_preemption_history* history(unsigned vcpu) const;

  // One acquire load of the state field: what the guest's
  // vcpu_is_preempted() does.
  abi::RunState state(unsigned vcpu) const;
  // A consistent copy of one record (seqlock read).
  abi::VcpuRunState snapshot(unsigned vcpu) const;

  // "tp_btf/sched_switch" or "raw_tp/sched_switch".
  const std::string& attach_point() const;
  // Kernel object ids: what bpftool shows; tests use them to see the program go.
  std::uint32_t program_id() const;
  std::uint32_t page_map_id() const;
  ProgramStats program_stats() const;

  struct Impl;

 private:
  explicit RunStatePage(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Helpers for any mapping of the page (the VMM's, a test's second mapping).
abi::RunState load_state(const abi::VcpuRunState& record);
abi::VcpuRunState read_record(const abi::VcpuRunState& record);
const char* run_state_name(abi::RunState state);

}  // namespace lockvisor::runstate
