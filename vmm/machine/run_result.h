// What a run produced: how it ended, and everything measured on the way.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vmm/machine/vcpu_park.h"
#include "vmm/metrics/thread_usage.h"
#include "vmm/pvlock/pv_counters.h"

namespace lockvisor::machine {

// Process exit codes, documented in README.md ("Exit codes").
enum class Outcome {
  kCompleted = 0,    // every vCPU finished its program with exit code 0
  kGuestFailed = 1,  // a guest assertion failed or a program exited non-zero
  kUsageError = 2,   // (command line only)
  kGuestFault = 3,   // exception, triple fault, bad MMIO, KVM internal error
  kTimeout = 4,      // --timeout expired
  kDeadlock = 5,     // every vCPU halted with no kick pending: nobody can wake them
  kHostError = 6,    // KVM or host setup failed
  kInterrupted = 130,
};
const char* outcome_name(Outcome outcome);
inline int exit_code(Outcome outcome) { return static_cast<int>(outcome); }
// The outcome's name for a process exit code (a child lockvisor run's), or
// "killed-by-signal-N" / "exit-code-N" for a code no outcome has.
std::string outcome_for_exit_code(int code);

// kStopped: the run was ended (by another vCPU, the watchdog, a signal)
// while this vCPU was running or had not started yet.
enum class VcpuState { kStarting, kRunning, kHalted, kDone, kFaulted, kStopped };
const char* vcpu_state_name(VcpuState state);

struct ResultValue {
  std::string key;
  std::vector<std::uint64_t> values;  // one for a scalar
  std::uint64_t kind = 0;             // abi::ResultKind
};

struct GuestCase {
  std::string name;
  bool passed = false;
  bool ended = false;
};

// What the run-state page counted for one vCPU while its thread was
// registered, and the thread's involuntary context switches over exactly the
// same span (both sampled between two equal seq reads of its record).
struct VcpuRunStateCounts {
  std::uint64_t preemptions = 0;
  std::uint64_t sleeps = 0;
  std::uint64_t runs = 0;
  std::uint64_t anomalies = 0;
  std::uint64_t involuntary_switches = 0;  // getrusage over the same span
  // The record's own preemption count at the end: what the guest can read.
  // It counts from the thread's registration, the deltas above from the
  // first sample after it, so it may be larger by the switches in between.
  std::uint64_t record_preemptions = 0;
};

// Injected preemptions of one kind (periodic, random, holder, waiter) on one
// vCPU, from the injector (vmm/inject/). Targeted kinds add the guest's own
// counts (its lock-probe record, reported as results) and the indices of the
// events that became preemption points.
struct InjectedKindCounts {
  std::uint64_t count = 0;  // injections the VMM delivered (park requests accepted)
  std::uint64_t ns = 0;     // their requested length
  std::optional<std::uint64_t> guest_count;   // targeted: preemption points the guest says it sent
  std::optional<std::uint64_t> guest_events;  // targeted: eligible events the guest saw
  std::vector<std::uint64_t> event_indices;   // targeted: chosen events' indices (the first 1024)
};

struct VcpuReport {
  unsigned index = 0;
  unsigned apic_id = 0;
  VcpuState final_state = VcpuState::kStarting;
  bool kick_pending = false;
  std::uint64_t last_hypercall = 0;
  std::uint64_t rip = 0;
  bool exited = false;  // false: the guest never exited to the VMM, rip means nothing
  std::optional<std::uint64_t> guest_exit_code;
  // The PV backend's counters (pvlock::VcpuPvCounters), typed: JSON only at the output.
  pvlock::PvCounts pv;
  std::vector<std::uint64_t> wake_latency_ns;
  // KVM's binary statistics at the end of the run.
  std::map<std::string, std::uint64_t> kvm;
  std::map<std::string, std::uint64_t> exits;  // by lockvisor's exit classification
  double cpu_seconds = 0;
  std::optional<std::uint64_t> runqueue_wait_ns;  // runnable but not running (schedstat): steal seen from the host
  std::uint64_t voluntary_switches = 0;
  std::uint64_t involuntary_switches = 0;
  std::optional<VcpuRunStateCounts> runstate;  // only when the page was live
  // Preemptions the VMM injected and pauses it held (vcpu_park.h).
  ParkCounts park;
  std::map<std::string, InjectedKindCounts> injected;  // by kind name; only kinds with a schedule
  // The thread's usage when the guest marked its measured window's start and
  // end (abi::UcallType::kWindowMark); absent when it sent no such mark.
  std::optional<metrics::ThreadUsage> window_start;
  std::optional<metrics::ThreadUsage> window_end;
  // The guest's steal-time record (MSR_KVM_STEAL_TIME) at the end of the run:
  // absent when the guest did not enable one (not advertised, --no-steal-time).
  std::optional<std::uint64_t> steal_time_ns;
  bool steal_preempted = false;  // the record's `preempted` byte (never set on PVM)
  std::vector<int> affinity;
  std::vector<ResultValue> results;
  std::vector<GuestCase> cases;
  // Guest strings (PRINT, ASSERT, keys, case names) whose invalid UTF-8 was
  // replaced with U+FFFD.
  std::uint64_t guest_text_replaced = 0;
};

// What the guest made the VMM keep or do, against MachineConfig::limits.
struct GuestUsage {
  std::uint64_t report_messages = 0;
  std::uint64_t report_bytes = 0;
  std::uint64_t serial_bytes = 0;
};

// A --kick switch made while the VM ran (the control socket's kick-mode):
// the settings of the report list them, so a result never claims one mode
// for the whole run when it had two.
struct KickModeChange {
  double at_seconds = 0;  // since the run's origin
  std::string from;
  std::string to;
};

struct RunResult {
  Outcome outcome = Outcome::kCompleted;
  std::string reason;  // one line: why the run ended the way it did
  std::vector<std::string> details;  // per-vCPU state lines for deadlocks and timeouts
  std::vector<VcpuReport> vcpus;
  std::vector<std::string> guest_prints;
  std::vector<std::string> serial_lines;  // "vCPU N: text" ("vCPU N+ text": a split line goes on), with MachineConfig::capture_serial only
  double wall_seconds = 0;
  double seconds_to_first_entry = 0;  // run start -> first KVM_RUN
  double seconds_to_first_exit = 0;   // run start -> first exit from guest code
  // When each step of the build finished, seconds since the same origin
  // (bench's start-up breakdown): the VM with its RAM slot, the image and
  // boot tables, the run-state page, the vCPUs, and run() starting threads.
  struct StartupMarks {
    double vm = 0, runstate = 0, image = 0, vcpus = 0, run = 0;  // seconds since origin, in build order
    // Off the path to the first entry: when the live run-state page replaced
    // the zeros (0: never, e.g. --runstate off or a failed load).
    double runstate_live = 0;
    // Minor page faults the building thread took from the build's start to
    // its end (the image, boot tables, KVM's own pages on our behalf).
    std::uint64_t build_page_faults = 0;
  } startup;
  std::string backend;                // PV backend name
  std::uint64_t unknown_kvm_hypercalls = 0;  // doorbell 0xE4 calls no handler answered (-KVM_ENOSYS)
  std::uint64_t unknown_sbi_calls = 0;       // doorbell 0xE5 calls no handler answered (NOT_SUPPORTED)
  std::string kvm_kind;               // PVM / VMX / SVM
  std::uint64_t tsc_khz = 0;
  GuestUsage guest_usage;
  // The vCPU run-state page: "bpf" (live) or "unknown" (a zero page), and
  // how it attached or why not.
  std::string runstate = "unknown";
  std::string runstate_detail;
  std::vector<KickModeChange> kick_mode_changes;  // in time order; empty: --kick held for the whole run
  // A Linux guest: the kernel log lines the report keeps (linux_console.h)
  // and the exit status its init reported before powering off.
  bool linux_guest = false;
  std::vector<std::string> kernel_lines;
  std::optional<std::uint64_t> guest_status;

  // Guest strings with invalid UTF-8 replaced, over all vCPUs.
  std::uint64_t guest_text_replaced() const;
  // Looks up a result reported by vCPU `vcpu` (nullptr when absent).
  const ResultValue* result(unsigned vcpu, const std::string& key) const;
  // vCPU `vcpu`'s PV counters (all zero for a vCPU that does not exist).
  const pvlock::PvCounts& pv(unsigned vcpu) const;
};

}  // namespace lockvisor::machine
