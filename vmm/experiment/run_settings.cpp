#include "vmm/experiment/run_settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "vmm/experiment/workload_settings.h"

namespace lockvisor::experiment {
namespace {

using T = SettingType;
using G = SettingTarget;
constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();

// A workload-record field: range and default from its abi::WorkloadLimit row.
constexpr RunSetting record(const char* key, const char* flag, const abi::WorkloadLimit& l, const char* def,
                            const char* help, const char* lab, const char* guest_key) {
  return {.key = key, .flag = flag, .type = T::kUnsigned, .target = G::kWorkload, .min = l.min, .max = l.max,
          .def = def, .help = help, .lab = lab, .guest_key = guest_key, .limit = &l};
}

// The lab's settings come first, in the order a point's command line lists
// them (equal settings give equal command lines); the rest follow.
// clang-format off
constexpr RunSetting kRows[] = {
  {.key = "workload", .flag = "--workload", .type = T::kChoice, .target = G::kRun,
   .choices = "pingpong|lockbench|uncontended|torture|hello|empty|idle|futex-hash|lockref|pipe|spawn",
   .def = "pingpong",
   .help = "Workload to run: pingpong, lockbench, uncontended, torture, hello, empty; with --native lockbench "
           "(the default there), uncontended or torture; with --kernel the Linux guest's init runs hello (the "
           "default there), idle, futex-hash, lockref, pipe or spawn",
   .lab = "lockbench, uncontended or torture; with kernel futex-hash, lockref, pipe or spawn",
   .cli_names = "-w,--workload"},
  {.key = "kernel", .flag = "--kernel", .type = T::kText, .target = G::kRun,
   .help = "Boot this Linux bzImage instead of lockvisor's guest (hardware KVM or tools/nested-kvm; "
           "docs/linux-guests.md)",
   .lab = "a Linux bzImage the point boots (lab --kernel FILE sets it for every point)", .guest_only = true},
  {.key = "initrd", .flag = "--initrd", .type = T::kText, .target = G::kRun,
   .help = "--kernel: this initramfs instead of lockvisor's (whose /init runs --workload)",
   .lab = "kernel: an initramfs instead of lockvisor's", .guest_only = true},
  {.key = "append", .flag = "--append", .type = T::kText, .target = G::kRun,
   .help = "--kernel: more kernel command line, after lockvisor's own",
   .lab = "kernel: more kernel command line", .guest_only = true},
  {.key = "guest_lock", .flag = "--guest-lock", .type = T::kChoice, .target = G::kRun, .choices = "pv|tas|native",
   .def = "pv",
   .help = "--kernel: the kernel's spinlock, chosen through CPUID: pv (PV qspinlock), tas (virt_spin_lock "
           "test-and-set), native (queued spinlock)",
   .lab = "kernel: the kernel's spinlock policy, pv, tas or native", .guest_only = true},
  {.key = "kvmclock", .flag = "--kvmclock", .type = T::kChoice, .target = G::kRun, .choices = "on|off", .def = "on",
   .help = "--kernel: offer the kvmclock clocksource", .lab = "kernel: on or off", .guest_only = true},
  {.key = "lock", .flag = "--lock", .type = T::kText, .target = G::kWorkload, .def = "auto",
   .help = "Lock algorithm for lock workloads (see 'lockvisor locks')", .lab = "lock algorithm (lockvisor locks)",
   .guest_key = "lock", .cli_names = "-l,--lock"},
  {.key = "vcpus", .flag = "--vcpus", .type = T::kUnsigned, .target = G::kMachine, .min = 1, .max = abi::kMaxVcpus,
   .def = "2", .help = "Number of vCPUs (may exceed host CPUs: that is the point), or a ratio of --pcpus (2x)",
   .lab = "vCPUs (or host threads with native)"},
  {.key = "pcpus", .flag = "--pcpus", .type = T::kText, .target = G::kMachine,
   .help = "Host CPUs the vCPU threads may use, e.g. 0 or 0-1 (default: all allowed)",
   .lab = "host-CPU set, e.g. 0 or 0-1"},
  {.key = "pin", .flag = "--pin", .type = T::kChoice, .target = G::kMachine, .choices = "spread|float",
   .def = "spread", .help = "spread: vCPU i pinned to the i-th of --pcpus round-robin; float: any of them",
   .lab = "spread or float"},
  {.key = "vnuma", .flag = "--vnuma", .type = T::kText, .target = G::kMachine,
   .help = "Virtual NUMA nodes: N (vCPUs and host CPUs split into N nodes in order) or VCPUS@HOSTCPUS,... per node, "
           "e.g. 0-3@0,4-7@1 (ranges joined by '+'); the guest reads each vCPU's node, threads run on their node's CPUs",
   .lab = "virtual NUMA nodes: N or VCPUS@HOSTCPUS,...", .json = "vnuma"},
  {.key = "vnuma_remote_ns", .flag = "--vnuma-remote-ns", .type = T::kUnsigned, .target = G::kMachine, .min = 0,
   .max = 1000000, .def = "0",
   .help = "With --vnuma: a MODELLED remote cost, a lock workload that acquires a lock last released on another "
           "node busy-waits N ns first (0: off)",
   .lab = "with vnuma: modelled remote-handoff cost, ns", .json = "vnuma_remote_ns", .guest_only = true},
  record("cs_ns", "--cs", abi::kCsNs, "100", "Critical section length, ns", "critical section, ns", "cs"),
  record("cs_lines", "--cs-lines", abi::kCsLines, "1", "Shared cache lines written in the critical section",
         "cache lines written in the critical section", "cs_lines"),
  record("delay_ns", "--delay", abi::kDelayNs, "170", "Work outside the critical section, ns",
         "work outside the critical section, ns", "delay"),
  {.key = "duration_s", .flag = "--duration", .type = T::kSeconds, .target = G::kWorkload,
   .min_s = static_cast<double>(abi::kDurationNs.min) / 1e9, .max_s = static_cast<double>(abi::kDurationNs.max) / 1e9,
   .def = "1", .help = "Measured window, seconds", .lab = "measured window, s",
   .guest_key = "duration_ms", .limit = &abi::kDurationNs},
  record("iterations", "--iterations", abi::kIterations, nullptr,
         "Acquisitions per vCPU instead of a duration", "acquisitions per CPU instead of a duration",
         "iterations"),
  {.key = "layout", .flag = "--layout", .type = T::kChoice, .target = G::kWorkload, .choices = "standalone|embedded",
   .def = "standalone", .help = "standalone: lock and data in different cache lines; embedded: same line",
   .lab = "standalone or embedded", .guest_key = "layout"},
  record("locks", "--locks", abi::kLocks, nullptr, "torture: number of locks",
         "torture: number of locks", "locks"),
  record("long_hold_ns", "--long-hold-ns", abi::kLongHoldNs, "100000",
         "torture: length of the occasional long hold, ns", "torture: long-hold length, ns", "long_hold_ns"),
  record("long_hold_every", "--long-hold-every", abi::kLongHoldEvery, nullptr,
         "torture: one long hold per N acquisitions on average",
         "torture: one long hold per N acquisitions (0: none)", "long_hold_every"),
  {.key = "kick", .flag = "--kick", .type = T::kChoice, .target = G::kMachine, .choices = "sticky|lossy",
   .def = "sticky", .help = "sticky: a kick before a halt is remembered; lossy: dropped unless halted",
   .lab = "sticky or lossy", .json = "kick", .guest_only = true},
  {.key = "kick_delay_us", .flag = "--kick-delay-us", .type = T::kUnsigned, .target = G::kMachine, .min = 0,
   .max = 1000000, .def = "0", .help = "Delay every kick by N microseconds",
   .lab = "delay every kick, us", .json = "kick_delay_us", .guest_only = true},
  {.key = "halt_poll_us", .flag = "--halt-poll-us", .type = T::kUnsigned, .target = G::kMachine, .min = 0,
   .max = 1000000, .help = "Same as --halt-poll fixed:N (0: off)",
   .lab = "poll before sleeping in a halt, us (= halt_poll fixed:N)", .guest_only = true},
  {.key = "halt_poll", .flag = "--halt-poll", .type = T::kText, .target = G::kMachine,
   .help = "Halt polling: off, fixed:US (poll US us before sleeping) or adaptive[:MAX_US] (KVM's grow/shrink "
           "window, max 200 us by default)",
   .lab = "off, fixed:US or adaptive[:MAX_US]", .json = "halt_poll", .guest_only = true},
  {.key = "kick_yield", .flag = "--kick-yield", .type = T::kChoice, .target = G::kMachine, .choices = "on|off",
   .def = "off", .help = "on: a kicker that wakes a vCPU which last ran on its host CPU yields that CPU (sched_yield)",
   .lab = "on or off: the kicker yields to a woken vCPU on its CPU", .json = "kick_yield", .guest_only = true},
  {.key = "kick_boost", .flag = "--kick-boost", .type = T::kChoice, .target = G::kMachine, .choices = "on|off",
   .def = "off", .help = "on: a kick boosts the vCPU it wakes (see --boost)",
   .lab = "on or off: a kick boosts the woken vCPU", .json = "kick_boost", .guest_only = true},
  {.key = "boost", .flag = "--boost", .type = T::kChoice, .target = G::kMachine, .choices = "auto|fifo|nice|off",
   .def = "auto",
   .help = "How YIELD_TO and --kick-boost boost a vCPU thread for up to 4 ms: fifo (SCHED_FIFO), nice (nice -20), "
           "off, auto (fifo when permitted, else off); fifo/nice without CAP_SYS_NICE: exit 6",
   .lab = "auto, fifo, nice or off: how YIELD_TO and kick boosts work", .json = "boost", .guest_only = true},
  {.key = "no_steal_time", .flag = "--no-steal-time", .type = T::kSwitch, .target = G::kMachine,
   .help = "Hide KVM_FEATURE_STEAL_TIME: the guest keeps no steal-time record", .lab = "hide KVM_FEATURE_STEAL_TIME",
   .json = "steal_time", .guest_only = true},
  {.key = "backend", .flag = "--backend", .type = T::kChoice, .target = G::kMachine, .choices = "userspace|kvm",
   .def = "userspace",
   .help = "PV backend. userspace: KICK_CPU and halts are doorbell exits to the VMM (every KVM); kvm: KVM's "
           "in-kernel KICK_CPU (vmcall/vmmcall and hlt at CPL0, in-kernel irqchip; not on PVM)",
   .lab = "userspace or kvm", .json = "backend", .guest_only = true},
  {.key = "guest_ring", .flag = "--guest-ring", .type = T::kChoice, .target = G::kMachine, .choices = "0|3",
   .def = "3",
   .help = "Ring the guest program runs in: 3 (default) or 0 (hlt/vmcall direct, PLE sees its pause loops; not on "
           "PVM)",
   .lab = "3 or 0: where the workload runs", .json = "guest_ring", .guest_only = true},
  {.key = "pv_wake", .flag = "--pv-wake", .type = T::kChoice, .target = G::kMachine, .choices = "hypercall|ipi|nmi",
   .def = "hypercall",
   .help = "How a PV lock wakes a halted waiter: hypercall (KICK_CPU), ipi (a fixed-vector x2APIC IPI) or nmi; "
           "ipi and nmi need --backend kvm --guest-ring 0 (docs/wake-mechanisms.md)",
   .lab = "hypercall, ipi or nmi: how a PV lock wakes a halted waiter", .json = "pv_wake", .guest_only = true},
  {.key = "ple", .flag = "--ple", .type = T::kChoice, .target = G::kMachine, .choices = "on|off", .def = "on",
   .help = "Pause-loop exiting: on (as the KVM module sets it) or off (KVM_CAP_X86_DISABLE_EXITS PAUSE)",
   .lab = "on or off: pause-loop exiting", .json = "ple", .guest_only = true},
  {.key = "runstate", .flag = "--runstate", .type = T::kChoice, .target = G::kMachine, .choices = "auto|on|off",
   .def = "auto",
   .help = "vCPU run-state page (sched_switch BPF, read-only in the guest): auto: when it loads, else 'unknown'; "
           "on: fail (exit 6) if it cannot load; off: always 'unknown'",
   .lab = "auto, on or off", .guest_only = true},
  {.key = "no_pv", .flag = "--no-pv", .type = T::kSwitch, .target = G::kMachine,
   .help = "Hide KVM_FEATURE_PV_UNHALT; KICK_CPU returns -1000", .lab = "hide KVM_FEATURE_PV_UNHALT",
   .json = "pv_unhalt", .guest_only = true},
  {.key = "dedicated", .flag = "--dedicated", .type = T::kSwitch, .target = G::kMachine,
   .help = "Advertise KVM_HINTS_REALTIME (vCPUs are dedicated)", .lab = "advertise KVM_HINTS_REALTIME", .guest_only = true},
  {.key = "memory_mib", .flag = "--memory", .type = T::kUnsigned, .target = G::kMachine, .min = 2,
   .max = abi::kMaxMemoryBytes >> 20, .def = "64", .help = "Guest memory in MiB (an even number); without it, the default or the least the vCPUs' stacks need",
   .lab = "guest memory, MiB", .guest_only = true},
  {.key = "seed", .flag = "--seed", .type = T::kUnsigned, .target = G::kMachine, .min = 0, .max = kU64Max,
   .def = "1", .help = "Seed of the guest's pseudo-random choices", .lab = "seed of the workload's random choices",
   .json = "inject_seed"},
  {.key = "inject", .flag = "--inject", .type = T::kText, .target = G::kMachine,
   .help = "Inject preemptions (repeatable; docs/preemption.md): periodic:vcpu=N|all,every=DUR,for=DUR"
           "[,phase=DUR][,count=N] | random:vcpu=N|all,rate=HZ,for=DUR[,seed=N][,count=N] | "
           "holder|waiter:lock=N|any,every=N|p=P,for=DUR[,seed=N]",
   .lab = "preemption injection, ';'-separated specs (docs/preemption.md)", .json = "inject", .repeatable = true},
  {.key = "param", .flag = "--param", .type = T::kText, .target = G::kRun,
   .help = "Extra workload parameter key=value (repeatable)",
   .lab = "extra workload parameters key=value, several separated by spaces (e.g. \"pvb_handoff=running pvb_boost=0\")",
   .repeatable = true},
  {.key = "timeout_s", .flag = "--timeout", .type = T::kSeconds, .target = G::kMachine, .min_s = 0.001, .max_s = 1e6,
   .zero_allowed = true, .def = "0",
   .help = "Watchdog: stop the guest after S seconds (exit code 4); 0: none (lock workloads: 10 x --duration + "
           "60 s)",
   .lab = "watchdog, s", .guest_only = true},
  {.key = "hogs", .flag = "--hogs", .type = T::kUnsigned, .target = G::kRun, .min = 0, .max = 256, .def = "0",
   .help = "Host CPU hogs: N busy threads spread over --pcpus for the run",
   .lab = "host CPU hogs: N busy threads over pcpus for the run", .vm = VmScope::kNotPerVm},
  {.key = "native", .flag = "--native", .type = T::kSwitch, .target = G::kRun,
   .help = "Run the lock workload on host threads (no VM), pinned the same way", .lab = "run on host threads, no VM",
   .vm = VmScope::kNotPerVm},

  // ---- not lab settings
  {.key = "rounds", .flag = "--rounds", .type = T::kUnsigned, .target = G::kRun, .min = 0, .max = 1000000000000,
   .def = "0", .help = "pingpong: turns each vCPU takes (0: default 1000)", .guest_key = "rounds", .workloads = "pingpong"},
  {.key = "spin", .flag = "--spin", .type = T::kUnsigned, .target = G::kRun, .min = 0, .max = 1000000000,
   .def = "0", .help = "pingpong: pause iterations before halting", .guest_key = "spin", .workloads = "pingpong"},
  {.key = "halt", .flag = "--halt", .type = T::kChoice, .target = G::kRun, .choices = "hypercall|kernel",
   .def = "hypercall", .help = "pingpong: hypercall (CPL3 HALT) or kernel (`hlt` at CPL0)", .guest_key = "halt", .workloads = "pingpong"},
  record("wait_halt_delay_ns", "--wait-halt-delay-ns", abi::kWaitHaltDelayNs, "0",
         "Test knob: after a PV wait's re-check, wait up to N ns for the waker's write and N ns more before the halt, "
         "forcing the lost-wake-up interleaving (guest only)",
         nullptr, nullptr),
  {.key = "sbi_kick", .flag = "--sbi-kick", .type = T::kChoice, .target = G::kMachine, .choices = "sticky|proposed",
   .def = "sticky",
   .help = "SBI PVLOCK kick: sticky (remembered until the next halt, like KVM's pv_unhalted) or proposed (the "
           "RISC-V host patch: lost unless the target is halted)",
   .json = "sbi_kick", .guest_only = true},
  {.key = "enforce_pv_cpuid", .flag = "--enforce-pv-cpuid", .type = T::kChoice, .target = G::kMachine,
   .choices = "on|off", .def = "on",
   .help = "With --no-pv: on refuses KICK_CPU (KVM_CAP_ENFORCE_PV_FEATURE_CPUID); off kicks anyway, as KVM does "
           "without enforcement",
   .json = "enforce_pv_cpuid", .guest_only = true},
  {.key = "no_sbi_pvlock", .flag = "--no-sbi-pvlock", .type = T::kSwitch, .target = G::kMachine,
   .help = "Turn the SBI PVLOCK extension off", .guest_only = true},
  {.key = "sbi_eid", .flag = "--sbi-eid", .type = T::kText, .target = G::kMachine,
   .help = "Experimental-range alias of the SBI PVLOCK EID (hex)", .guest_only = true},
  {.key = "serial", .flag = "--serial", .type = T::kText, .target = G::kMachine,
   .help = "Write the guest's COM1 output to FILE instead of stdout", .vm = VmScope::kOwnPath, .guest_only = true},
  {.key = "image", .flag = "--image", .type = T::kText, .target = G::kRun,
   .help = "Guest ELF image (default: the one built into lockvisor)", .guest_only = true},
  {.key = "json", .flag = "--json", .type = T::kText, .target = G::kRun,
   .help = "Write the full report as JSON to FILE (absent or a regular file, checked first; replaced atomically)",
   .vm = VmScope::kNotPerVm},
  {.key = "api", .flag = "--api", .type = T::kText, .target = G::kRun,
   .help = "Serve the control socket at SOCK while the VM runs (owner-only; see 'lockvisor ctl' and "
           "docs/control-socket.md)", .vm = VmScope::kOwnPath, .guest_only = true},
  {.key = "trace", .flag = "--trace", .type = T::kText, .target = G::kRun,
   .help = "Write the run's timeline as Chrome trace-event JSON to FILE (Perfetto, chrome://tracing; docs/trace.md; "
           "absent or a regular file, replaced atomically)", .vm = VmScope::kOwnPath, .guest_only = true},
  {.key = "trace_max_events", .flag = "--trace-max-events", .type = T::kUnsigned, .target = G::kRun, .min = 1000,
   .max = 1000000000, .def = "4000000",
   .help = "--trace: a cap on the events written (later ones are counted as dropped)", .guest_only = true},
  {.key = "trace_window", .flag = "--trace-window", .type = T::kText, .target = G::kRun, .def = "all",
   .help = "--trace: write only all | START:END (e.g. 120ms:125ms since the start) | worst-wait[:PAD] (the longest "
           "lock wait with PAD around it, default half the wait, at least 1ms)", .guest_only = true},
  {.key = "trace_merge_short", .flag = "--trace-merge-short", .type = T::kText, .target = G::kRun,
   .help = "--trace: write back-to-back lock waits and holds shorter than DUR (e.g. 10us) as one 'acquisitions' "
           "slice each run of them (longer ones stay as they are)", .guest_only = true},
  {.key = "vm", .flag = "--vm", .type = T::kText, .target = G::kRun,
   .help = "Run several VMs side by side, started and stopped together: key=value[,key=value...] over run's long "
           "options plus label=NAME (repeatable; docs/multi-vm.md)",
   .repeatable = true, .vm = VmScope::kNotPerVm},
  {.key = "start_gate_fd", .flag = "--start-gate-fd", .type = T::kUnsigned, .target = G::kRun, .min = 0,
   .max = 1 << 20, .vm = VmScope::kNotPerVm, .guest_only = true},
};
// clang-format on

}  // namespace

std::span<const RunSetting> run_settings() { return kRows; }

const RunSetting* find_run_setting(std::string_view key) {
  for (const auto& s : kRows)
    if (key == s.key) return &s;
  return nullptr;
}

const RunSetting* find_run_setting_by_flag(std::string_view flag) {
  for (const auto& s : kRows)
    if (flag == s.flag) return &s;
  return nullptr;
}

const RunSetting* find_run_setting_by_limit(const abi::WorkloadLimit& limit) {
  for (const auto& s : kRows)
    if (s.limit == &limit) return &s;
  return nullptr;
}

const char* option_for_guest_key(std::string_view key) {
  for (const auto& s : kRows)
    if (s.guest_key != nullptr && key == s.guest_key) return s.flag;
  return nullptr;
}

std::string ignored_by(const RunSetting& s, const std::string& value, const std::string& workload, bool native) {
  if (s.def != nullptr && value == s.def) return {};
  if (native && s.guest_only) return fmt::format("{}: a VM's setting; --native runs host threads, no VM", s.flag);
  if (s.workloads != nullptr) {
    const std::string_view list = s.workloads;
    for (std::size_t at = 0; at <= list.size();) {
      const std::size_t bar = std::min(list.find('|', at), list.size());
      if (list.substr(at, bar - at) == workload) return {};
      at = bar + 1;
    }
    std::string readers(list);
    std::replace(readers.begin(), readers.end(), '|', '/');
    return fmt::format("{}: only {} reads it, and this run's workload is {}", s.flag, readers, workload);
  }
  if (s.target == SettingTarget::kWorkload && !is_lock_workload(workload))
    return fmt::format("{}: a lock workload's setting (lockbench, uncontended, torture), and this run's workload, {}, "
                       "takes no lock",
                       s.flag, workload);
  return {};
}

std::string range_text(const RunSetting& s) {
  switch (s.type) {
    case SettingType::kUnsigned:
      return s.max == kU64Max ? fmt::format("{}..2^64-1", s.min) : fmt::format("{}..{}", s.min, s.max);
    case SettingType::kSeconds: return fmt::format("{}{}..{} s", s.zero_allowed ? "0 or " : "", s.min_s, s.max_s);
    default: return {};
  }
}

}  // namespace lockvisor::experiment
