// lockvisor doctor: what this host offers and which PV backends can run.
#include <linux/kvm.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <fstream>
#include <optional>

#include "lockvisor/abi/guest_layout.h"
#include "vmm/cli/commands.h"
#include "vmm/host/cpu_set.h"
#include "vmm/host/host_numa.h"
#include "vmm/host/kvm_module_params.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/machine/run_result.h"
#include "vmm/runstate/runstate_page.h"
#include "vmm/runstate/runstate_pool.h"
#include "vmm/util/error.h"

namespace lockvisor::cli {
namespace {

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

// How --vnuma can use the host's NUMA nodes: on a multi-node host, one
// virtual node per real node (docs/vnuma.md); on a single node, virtual
// nodes are labels and pinning only, and any remote cost is a model.
void print_numa_line() {
  const auto nodes = host::host_numa_nodes();
  std::string list;
  for (const auto& n : nodes)
    list += fmt::format("{}node{}: {}", list.empty() ? "" : ", ", n.id, n.cpus.empty() ? "-" : host::format_cpu_list(n.cpus));
  if (nodes.size() < 2) {
    fmt::print("NUMA nodes     : {} ({}); --vnuma nodes are virtual here, a remote cost only modelled "
               "(--vnuma-remote-ns)\n",
               nodes.size(), list.empty() ? "no node directory" : list);
    return;
  }
  std::string mapping;
  for (std::size_t k = 0; k < nodes.size() && k < 4; ++k) {
    std::string cpus = host::format_cpu_list(nodes[k].cpus);
    std::replace(cpus.begin(), cpus.end(), ',', '+');  // a comma separates nodes in --vnuma
    mapping += fmt::format("{}VCPUS{}@{}", k ? "," : "", k, cpus.empty() ? "-" : cpus);
  }
  fmt::print("NUMA nodes     : {} ({}); map virtual nodes onto them with --vnuma {} (VCPUSk: that node's vCPUs, "
             "e.g. 0-3), and leave --vnuma-remote-ns at 0: the remote cost is then real\n",
             nodes.size(), list, mapping);
}

int doctor() {
  const auto backend = kvm::detect_backend();
  fmt::print("host CPUs      : {} (this process may use {})\n", host::host_cpu_count(),
             host::format_cpu_list(host::allowed_cpus()));
  fmt::print("CPU model      : {}\n", cpu_model());
  print_numa_line();
  std::string kind_note;
  if (backend == kvm::Backend::kPvm)
    kind_note = " (software PVM: guest CPL0 emulated, vmcall never completes)";
  else if (backend == kvm::Backend::kNone)
    kind_note = kvm::kernel_is_pvm_guest()
                    ? " (no usable KVM device; this kernel has kvm_pvm loaded without one: it is itself a PVM guest)"
                    : " (no usable KVM device)";
  fmt::print("KVM kind       : {}{}\n", kvm::backend_name(backend), kind_note);
  const std::string device = kvm::kvm_device_path();
  std::optional<kvm::KvmSystem> system;
  try {
    system.emplace(kvm::KvmSystem::open(device));
  } catch (const Error& e) {
    fmt::print("KVM device     : {}: no usable KVM at this path\n", device);
    fmt::print("backends       : none can run here (tools/nested-kvm/run.sh runs lockvisor inside an emulated AMD-V machine)\n");
    std::fflush(stdout);
    fmt::print(stderr, "lockvisor: error: {}\n", e.what());
    return machine::exit_code(machine::Outcome::kHostError);
  }
  fmt::print("KVM device     : {}, API version {}\n", device, system->api_version());
  struct Cap {
    long id;
    const char* name;
    const char* why;
  };
  const Cap caps[] = {
      {KVM_CAP_SYNC_REGS, "SYNC_REGS", "hypercall exits without extra ioctls (required)"},
      {KVM_CAP_IMMEDIATE_EXIT, "IMMEDIATE_EXIT", "race-free stop of a running vCPU (required)"},
      {KVM_CAP_GET_TSC_KHZ, "GET_TSC_KHZ", "guest TSC frequency (else calibrated)"},
      {KVM_CAP_BINARY_STATS_FD, "BINARY_STATS_FD", "per-vCPU KVM statistics"},
      {KVM_CAP_IRQCHIP, "IRQCHIP", "in-kernel irqchip (--backend kvm: KVM blocks and wakes halted vCPUs)"},
      {KVM_CAP_ENFORCE_PV_FEATURE_CPUID, "ENFORCE_PV_FEATURE_CPUID", "KICK_CPU refused when PV_UNHALT is hidden"},
      {KVM_CAP_X86_USER_SPACE_MSR, "X86_USER_SPACE_MSR", "MSR exits to userspace"},
      {KVM_CAP_X86_DISABLE_EXITS, "X86_DISABLE_EXITS", "--ple off (needs its PAUSE bit)"},
  };
  bool required = true;
  for (const auto& cap : caps) {
    const int value = system->check_extension(cap.id);
    fmt::print("  {:<26} {:<4} {}\n", cap.name, value > 0 ? "yes" : "no", cap.why);
    if ((cap.id == KVM_CAP_SYNC_REGS || cap.id == KVM_CAP_IMMEDIATE_EXIT) && value <= 0) required = false;
  }
  // What `run --vcpus` may ask here: the lower of this KVM's limit and lockvisor's own.
  const kvm::VcpuLimit limit = system->vcpu_limit();
  if (limit.vcpus < abi::kMaxVcpus)
    fmt::print("vCPUs per VM   : up to {} (this KVM's limit, {}; lockvisor's own is {})\n", limit.vcpus, limit.source,
               abi::kMaxVcpus);
  else
    fmt::print("vCPUs per VM   : up to {} (lockvisor's own limit; this KVM allows {}, {})\n", abi::kMaxVcpus,
               limit.vcpus, limit.source);
  fmt::print("backends       :\n");
  fmt::print("  userspace      {} (kick latches in the VMM; doorbell hypercalls from CPL3)\n",
             required ? "can run" : "cannot run: a required capability is missing");
  std::string kvm_backend = "can run (KVM's in-kernel KICK_CPU: vmcall/vmmcall and hlt at CPL0)";
  if (backend == kvm::Backend::kPvm)
    kvm_backend = "cannot run: PVM (vmcall never completes)";
  else if (!required || system->check_extension(KVM_CAP_IRQCHIP) <= 0 ||
           system->check_extension(KVM_CAP_ENFORCE_PV_FEATURE_CPUID) <= 0)
    kvm_backend = "cannot run: needs SYNC_REGS, IMMEDIATE_EXIT, IRQCHIP and ENFORCE_PV_FEATURE_CPUID";
  fmt::print("  kvm            {}\n", kvm_backend);
  const bool linux_ok = backend != kvm::Backend::kPvm && system->check_extension(KVM_CAP_IRQCHIP) > 0 &&
                        system->check_extension(KVM_CAP_PIT2) > 0;
  fmt::print("Linux guests   : {}\n",
             backend == kvm::Backend::kPvm
                 ? "cannot run: PVM runs only kernels built as PVM guests (no distribution ships one); use hardware "
                   "KVM or tools/nested-kvm"
                 : linux_ok ? "can run (run --kernel; docs/linux-guests.md)"
                            : "cannot run: needs KVM_CAP_IRQCHIP and KVM_CAP_PIT2");
  fmt::print("guest ring 0   : {}\n", backend == kvm::Backend::kPvm
                                          ? "refused: PVM emulates guest CPL0 at ~1 us per instruction"
                                          : "can run (--guest-ring 0)");
  // Pause-loop exiting and halt polling: the host knobs a PV lock meets.
  const auto pause = host::read_pause_exit_params();
  std::string ple = pause.module == "none" ? "none (no kvm_intel/kvm_amd: no pause exits on this host)"
                                           : fmt::format("{}:", pause.module);
  for (const auto& [name, value] : pause.values) ple += fmt::format(" {}={}", name, value);
  const bool can_disable = (system->check_extension(KVM_CAP_X86_DISABLE_EXITS) & KVM_X86_DISABLE_EXITS_PAUSE) != 0;
  fmt::print("PLE            : {}; --ple off {}\n", ple, can_disable ? "possible" : "refused (no DISABLE_EXITS PAUSE)");
  const auto halt_poll = host::read_halt_poll_ns();
  fmt::print("halt polling   : kvm halt_poll_ns={} (--backend kvm); userspace backend: --halt-poll-us\n",
             halt_poll ? std::to_string(*halt_poll) : std::string("unknown"));
  // Informational: without it --runstate auto runs with a page of "unknown".
  const auto runstate = runstate::RunStatePage::probe();
  const bool readonly_mem = system->check_extension(KVM_CAP_READONLY_MEM) > 0;
  if (runstate.ok && readonly_mem)
    fmt::print("run-state page : can load (sched_switch BPF, {})\n", runstate.detail);
  else
    fmt::print("run-state page : cannot load: {}\n",
               runstate.ok ? "KVM lacks KVM_CAP_READONLY_MEM (the page must be a read-only memslot)" : runstate.detail);
  // The loaded programs kept between runs (runstate_pool.h): what stays in
  // the kernel after lockvisor exits, and how to remove it.
  const auto pool = runstate::pool_status();
  if (!pool.enabled) {
    fmt::print("run-state pool : off ({}=off): every run loads its own program\n", runstate::kPoolVariable);
  } else if (!pool.bpffs) {
    fmt::print("run-state pool : none yet (no bpffs at /sys/fs/bpf; the first run mounts it if it can)\n");
  } else {
    unsigned loaded = 0, attached = 0, in_use = 0;
    for (const auto& slot : pool.slots) {
      loaded += slot.loaded ? 1 : 0;
      attached += slot.attached ? 1 : 0;
      in_use += slot.in_use ? 1 : 0;
    }
    fmt::print("run-state pool : {} loaded program(s) pinned in {} (at most {} per build), {} in use now, {} still "
               "attached (detached {} s after its last run); remove all with `rm -r {}`\n",
               loaded, runstate::kPoolRoot, runstate::kPoolSlots, in_use, attached, runstate::kPoolIdleSeconds,
               runstate::kPoolRoot);
  }
  return required ? 0 : machine::exit_code(machine::Outcome::kHostError);
}

}  // namespace

Action add_doctor_command(CLI::App& app) {
  app.add_subcommand("doctor", "Show what this host's KVM offers and which PV backends can run");
  return [] { return doctor(); };
}

}  // namespace lockvisor::cli
