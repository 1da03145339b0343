// The Machine's state, shared by the files that build and run it
// (machine.cpp: the common steps; freestanding_boot.cpp and linux_boot.cpp:
// each kind of guest; machine_run.cpp: the run). Internal to vmm/machine.
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lockvisor/abi/boot_info.h"
#include "vmm/devices/io_bus.h"
#include "vmm/kvm/vm.h"
#include "vmm/machine/freestanding_ports.h"
#include "vmm/machine/linux_console.h"
#include "vmm/machine/machine.h"
#include "vmm/machine/run_control.h"
#include "vmm/machine/serial_console.h"
#include "vmm/machine/vcpu_runner.h"
#include "vmm/pvlock/hypercall_table.h"
#include "vmm/pvlock/pv_backend.h"
#include "vmm/runstate/runstate_loader.h"
#include "vmm/runstate/runstate_page.h"
#include "vmm/util/mapping.h"

namespace lockvisor::machine {

struct Machine::State {
  State(const kvm::KvmSystem& kvm, MachineConfig cfg, std::chrono::steady_clock::time_point origin_time)
      : config(std::move(cfg)),
        origin(origin_time),
        backend(pvlock::make_backend(config.backend_kind, config.vcpus, config.backend)),
        serial(config.capture_serial ? SerialConsole(SerialConsole::Capture{}, config.vcpus)
                                     : SerialConsole(config.serial_path, config.vcpus)),
        control(config, *backend, serial, origin),
        hypercalls(pvlock::make_pv_hypercall_table(
            *backend,
            {config.pv_unhalt, config.sbi_pvlock, config.sbi_experimental_eid,
             config.backend.enforce_pv_feature_cpuid, config.sbi_kick_proposed},
            [this](std::uint64_t apic_id) { return control.apic_to_index(apic_id); })),
        vm(kvm, config.memory_mib << 20) {}

  MachineConfig config;
  std::chrono::steady_clock::time_point origin;
  std::unique_ptr<pvlock::PvBackend> backend;  // through the interface only
  SerialConsole serial;
  RunControl control;
  // Decodes and answers the PV hypercalls of the freestanding guest's doorbells.
  std::unique_ptr<pvlock::HypercallTable> hypercalls;
  // The VM's devices: the bus maps ports to them (io_bus.h); both outlive
  // the vCPUs (declared before them).
  IoBus bus;
  bool linux_guest = false;
  bool hypervisor_bit = false;                 // Linux guests: CPUID.1:ECX[31] as set
  std::unique_ptr<LinuxConsole> linux_console;  // Linux guests: outlives the UART below
  std::vector<std::unique_ptr<PortDevice>> devices;
  ReportChannelPort* report_channel = nullptr;
  // The run-state page (runstate_loader.h): its view is the slot's host
  // memory, so it outlives the VM and the slot: members are destroyed in
  // reverse order, so vCPUs, then the slot (deleted), then the VM, then the
  // loader (which waits for a load still running).
  std::optional<runstate::RunStateLoader> runstate;
  bool runstate_loading = false;  // a load was started: BootInfo's kBootFlagRunStateLive
  bool runstate_readonly = false;  // KVM_CAP_READONLY_MEM: the slot is read-only
  kvm::Vm vm;
  std::optional<kvm::ExtraSlot> runstate_slot;  // from map_runstate_slot() on
  std::string runstate_kind = "unknown";  // "bpf" when the page is live
  std::string runstate_detail;
  std::vector<std::unique_ptr<VcpuRunner>> vcpus;
  // What each service was shown before boot (run_service.h): kept while
  // the services may use it, i.e. as long as they live.
  std::vector<std::unique_ptr<BootContext>> boot_contexts;
  std::vector<std::unique_ptr<RunService>> services;
  std::uint64_t tsc_khz = 0;
  std::string kvm_kind;
  RunResult::StartupMarks startup;  // seconds since origin at each step of the build (bench's breakdown)
  std::uint64_t page_faults_at_build_start = 0;

  double since_origin() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count(); }
  std::vector<std::string> vcpu_state_lines() const;
  // Waits for the run-state page's load, if one runs, and sets
  // runstate_kind and runstate_detail from its outcome: the page or nullptr.
  runstate::RunStatePage* settle_runstate();
  // The run-state page's memslot (machine.cpp); once.
  void map_runstate_slot();
  bool deadlocked() const;
  // The ports of lockvisor's freestanding guest (freestanding_ports.h).
  void add_freestanding_ports();
  // More vCPUs than abi::kMaxXapicVcpus: checks CPUID leaf 0xB and x2APIC,
  // enables KVM_CAP_X2APIC_API and sets kBootFlagX2apic (freestanding_boot.cpp).
  void enable_x2apic_ids(const std::vector<kvm_cpuid_entry2>& supported, lockvisor::abi::BootInfo& boot);
  template <typename Device, typename... Args>
  Device& add_device(Args&&... args) {
    devices.push_back(std::make_unique<Device>(std::forward<Args>(args)...));
    return static_cast<Device&>(*devices.back());
  }
};


inline constexpr std::uint64_t kTwoMiB = 2u << 20;
inline std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace lockvisor::machine
