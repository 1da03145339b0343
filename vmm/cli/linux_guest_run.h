// lockvisor run --kernel: an unmodified Linux kernel as the guest, with
// lockvisor's own initramfs (its /init runs one kernel-lock workload and
// reports on the console) unless --initrd names another.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vmm/linuxinit/init_report.h"
#include "vmm/linuxinit/kernel_spinlock.h"
#include "vmm/machine/linux_console.h"
#include "vmm/machine/linux_guest.h"
#include "vmm/machine/machine_config.h"
#include "vmm/machine/run_result.h"

namespace lockvisor::cli {

struct LinuxOptions {
  std::string kernel;   // --kernel: a bzImage
  std::string initrd;   // --initrd: replaces lockvisor's initramfs
  std::string append;   // --append: more kernel command line, after lockvisor's
  std::string guest_lock = "pv";  // --guest-lock pv|tas|native
  std::string workload = "hello";  // the in-guest init's workload
  std::uint64_t duration_ms = 1000;
  unsigned threads = 0;  // 0: one per online CPU
  bool kvmclock = true;  // --kvmclock on|off
};

// The in-guest init's workloads.
const std::vector<std::string>& linux_workloads();
bool is_linux_workload(const std::string& name);

// A Linux guest's memory unless --memory says otherwise: a distribution
// kernel, its initramfs and a workload's threads fit with room to spare.
inline constexpr std::uint64_t kLinuxDefaultMemoryMib = 512;
// --timeout unless given: booting takes seconds on hardware KVM and minutes
// in the emulated nested machine; the workload's time comes on top.
inline constexpr double kLinuxBootAllowanceS = 900;

// The most a kernel or an initrd file may be.
inline constexpr std::uint64_t kMaxKernelBytes = 256ull << 20;
inline constexpr std::uint64_t kMaxInitrdBytes = 2048ull << 20;

// The kernel command line lockvisor's init needs: lockvisor's base line and
// the init's parameters (workload, duration, threads, seed). A peer VMM
// booting lockvisor_initramfs() passes the same line.
std::string init_command_line(const LinuxOptions& options, std::uint64_t seed);
// lockvisor's initramfs: the embedded static /init as a newc cpio.
std::vector<std::byte> lockvisor_initramfs();

// A Linux guest ready to build: the files read and checked, the initramfs
// assembled, the command line composed and the boot planned. Everything
// here fails (one line, exit code 2) before any KVM object exists.
class PreparedLinuxGuest {
 public:
  PreparedLinuxGuest(const LinuxOptions& options, const machine::MachineConfig& config);

  const std::string& command_line() const { return cmdline_; }
  machine::GuestLockPolicy policy() const { return policy_; }
  // The Machine's view (linux_guest.h); its console lines feed this
  // object's parser, which must outlive the run.
  machine::LinuxGuest machine_guest();
  // After the run: what the init reported, and what the kernel chose.
  linux_guest::InitReport init_report();
  linuxboot::KernelSpinlock kernel_spinlock(const linux_guest::InitReport& report) const;
  bool own_init() const { return own_init_; }
  // When the console first showed a line of lockvisor's init (its start
  // record): the guest's time to init, for boot-time comparisons.
  std::optional<std::chrono::steady_clock::time_point> init_seen() const { return *init_seen_; }

 private:
  LinuxOptions options_;
  std::vector<std::uint8_t> kernel_;
  std::vector<std::uint8_t> initrd_;
  std::string cmdline_;
  machine::GuestLockPolicy policy_;
  bool own_init_ = true;
  linuxboot::LinuxBootPlan plan_;
  std::unique_ptr<linux_guest::InitReportParser> parser_ = std::make_unique<linux_guest::InitReportParser>();
  // Written once on a vCPU thread (under the console's lock), read after the run.
  std::unique_ptr<std::optional<std::chrono::steady_clock::time_point>> init_seen_ =
      std::make_unique<std::optional<std::chrono::steady_clock::time_point>>();
};

// The JSON report of a Linux run, shaped like a lock run's (lockstat's
// to_json) so that the lab and every reader of lock reports read it the same
// way: at the top the workload's figures (ops_per_sec, ops_total, fairness,
// latency_ns, per_thread_ops, guest_cpus_online), the host's cost
// (cpu_seconds, steal_ns, host_preemptions), KVM's counts (kvm_totals: with
// the in-kernel irqchip the guest's halts and KICK_CPUs stay in KVM) and
// mode "linux" with `lock` the spinlock the kernel chose; `vmm`,
// `window_fairness` and the *_window figures are null (no VMM PV device, no
// window marks). `linux` has the kernel's side: its choice and the log line
// it came from, what was asked for, the command line, time to init, the
// init's own record; `vm` is the run report (report::run_to_json) and
// `settings` its settings.
// `outcome` is the run's outcome name, or the crash's (take_kernel_end) with
// `linux.kernel_end` {kind, line} (null when the kernel did not crash).
nlohmann::json linux_report_json(const PreparedLinuxGuest& guest, const linux_guest::InitReport& report,
                                 const linuxboot::KernelSpinlock& spinlock, const machine::RunResult& result,
                                 const std::optional<machine::KernelEnd>& crash, nlohmann::json run_json,
                                 const std::string& kvm_kind, std::chrono::steady_clock::time_point origin);
// What the init reported, for people: the kernel's choice (and what was
// asked for, when it differs), the CPUs online, the workload's rate, the
// init's errors.
void print_init_lines(const linux_guest::InitReport& report, const linuxboot::KernelSpinlock& spinlock,
                      std::optional<machine::GuestLockPolicy> asked);
// Lines for people, after the run table.
void print_linux_summary(const PreparedLinuxGuest& guest, const linux_guest::InitReport& report,
                         const linuxboot::KernelSpinlock& spinlock, const machine::RunResult& result,
                         std::chrono::steady_clock::time_point origin);
// A run that ended because the kernel crashed (machine::kernel_end: a panic,
// init killed, a triple fault) becomes a guest fault whose reason is the
// panic line; returns the crash, for the outcome line and the JSON.
std::optional<machine::KernelEnd> take_kernel_end(machine::RunResult& result);
// The outcome's name on the outcome line and in the JSON: the crash's, else the run's.
std::string linux_outcome_name(const machine::RunResult& result, const std::optional<machine::KernelEnd>& crash);
// The JSON's `linux.kernel_end`: {kind, line}, null when the kernel did not crash.
nlohmann::json kernel_end_json(const std::optional<machine::KernelEnd>& crash);
// What lockvisor's init reported, as an exit code: 0, the workload failed
// (1), or the init never finished (3: nothing usable was measured).
int init_exit_code(const linux_guest::InitReport& report);
// The exit code the Linux half adds (0 when it adds nothing): the init's
// (init_exit_code), for a completed run with lockvisor's init.
int linux_exit_code(const PreparedLinuxGuest& guest, const linux_guest::InitReport& report,
                    const machine::RunResult& result);

}  // namespace lockvisor::cli
