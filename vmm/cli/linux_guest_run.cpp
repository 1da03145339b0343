#include "vmm/cli/linux_guest_run.h"

#include <algorithm>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "guest/linux/console_protocol.h"
#include "vmm/linuxinit/init_image.h"
#include "vmm/linuxboot/initramfs.h"
#include "vmm/linuxboot/linux_boot_plan.h"
#include "vmm/lockstat/lock_run.h"
#include "vmm/report/kvm_totals.h"
#include "vmm/util/error.h"
#include "vmm/util/input_file.h"

namespace lockvisor::cli {

const std::vector<std::string>& linux_workloads() {
  static const std::vector<std::string> kNames(std::begin(linux_init::kWorkloadNames),
                                               std::end(linux_init::kWorkloadNames));
  return kNames;
}

bool is_linux_workload(const std::string& name) {
  const auto& names = linux_workloads();
  return std::find(names.begin(), names.end(), name) != names.end();
}

namespace {

// What lockvisor always puts first on the kernel command line, and why:
//   console=ttyS0   the 16550A on COM1 is the only console;
//   quiet           the kernel prints only warnings: every console byte is a
//                   port I/O exit, and the init reads the lines the report
//                   needs from the kernel log itself (--append loglevel=7
//                   brings the whole log back);
//   panic=-1        a panic resets at once, which ends the run;
//   pci=off         the machine has no PCI bus (nothing answers 0xCF8);
//   io_delay=none   no port 0x80 writes between legacy port accesses (each
//                   would be an exit for nothing).
constexpr const char* kBaseCommandLine = "console=ttyS0 quiet panic=-1 pci=off io_delay=none";

std::string seconds_text(std::uint64_t ms) { return fmt::format("{}.{:03}", ms / 1000, ms % 1000); }

}  // namespace

std::string init_command_line(const LinuxOptions& options, std::uint64_t seed) {
  return fmt::format("{} lockvisor.workload={} lockvisor.duration={} lockvisor.threads={} lockvisor.seed={}",
                     kBaseCommandLine, options.workload, seconds_text(options.duration_ms), options.threads, seed);
}

std::vector<std::byte> lockvisor_initramfs() {
  return linux_guest::build_initramfs(linux_guest::embedded_linux_init());
}

PreparedLinuxGuest::PreparedLinuxGuest(const LinuxOptions& options, const machine::MachineConfig& config)
    : options_(options) {
  const auto policy = machine::parse_guest_lock(options.guest_lock);
  if (!policy) fail("--guest-lock {}: must be pv, tas or native", options.guest_lock);
  policy_ = *policy;
  if (!is_linux_workload(options.workload))
    fail("--workload {}: a Linux guest runs one of {}", options.workload, fmt::join(linux_workloads(), ", "));
  kernel_ = read_input_file(options.kernel, "--kernel", kMaxKernelBytes);
  own_init_ = options.initrd.empty();
  std::vector<std::byte> initramfs;
  if (own_init_) {
    initramfs = lockvisor_initramfs();
    initrd_.resize(initramfs.size());
    std::memcpy(initrd_.data(), initramfs.data(), initramfs.size());
  } else {
    initrd_ = read_input_file(options.initrd, "--initrd", kMaxInitrdBytes);
  }
  cmdline_ = own_init_ ? init_command_line(options, config.seed) : kBaseCommandLine;
  if (!options.append.empty()) cmdline_ += " " + options.append;

  linuxboot::LinuxBootInput input;
  input.kernel = kernel_;
  input.kernel_name = options.kernel;
  input.initrd = std::span<const std::uint8_t>(initrd_);
  input.initrd_name = own_init_ ? "lockvisor's initramfs" : options.initrd;
  input.cmdline = cmdline_;
  input.memory_bytes = config.memory_mib << 20;
  input.vcpu_count = config.vcpus;
  plan_ = linuxboot::plan_linux_boot(input);
}

machine::LinuxGuest PreparedLinuxGuest::machine_guest() {
  machine::LinuxGuest guest;
  guest.plan = plan_;
  guest.cpuid.lock = policy_;
  guest.cpuid.kvmclock = options_.kvmclock;
  linux_guest::InitReportParser* parser = parser_.get();
  auto* init_seen = init_seen_.get();
  guest.on_console_line = [parser, init_seen](std::string_view line) -> std::optional<std::uint64_t> {
    if (!*init_seen && line.starts_with(linux_init::kLinePrefix)) *init_seen = std::chrono::steady_clock::now();
    parser->feed_line(line);
    return parser->report().exit_status;
  };
  return guest;
}

linux_guest::InitReport PreparedLinuxGuest::init_report() { return parser_->finish(); }

linuxboot::KernelSpinlock PreparedLinuxGuest::kernel_spinlock(const linux_guest::InitReport& report) const {
  // The init's copy of the kernel log comes first; the console's (with a
  // louder loglevel, or a guest of the user's own) after it.
  return linuxboot::classify_kernel_spinlock(report.spinlock_log, true);
}

namespace {
std::optional<double> seconds_to_init(const PreparedLinuxGuest& guest, std::chrono::steady_clock::time_point origin) {
  if (!guest.init_seen()) return std::nullopt;
  return std::chrono::duration<double>(*guest.init_seen() - origin).count();
}
}  // namespace

nlohmann::json linux_report_json(const PreparedLinuxGuest& guest, const linux_guest::InitReport& report,
                                 const linuxboot::KernelSpinlock& spinlock, const machine::RunResult& result,
                                 const std::optional<machine::KernelEnd>& crash, nlohmann::json run_json,
                                 const std::string& kvm_kind, std::chrono::steady_clock::time_point origin) {
  nlohmann::json j = linux_guest::init_report_json(report);
  nlohmann::json lx = nlohmann::json::object();
  for (const char* key : {"guest_spinlock_log", "guest_init"}) {
    lx[key] = std::move(j[key]);
    j.erase(key);
  }
  // From the start of `lockvisor run` (before the VM is built) to the init's
  // first console line; null when lockvisor's init never spoke.
  const auto to_init = seconds_to_init(guest, origin);
  lx["seconds_to_init"] = to_init ? nlohmann::json(*to_init) : nlohmann::json(nullptr);
  lx["guest"] = "linux";
  lx["kernel_command_line"] = guest.command_line();
  lx["guest_lock_requested"] = std::string(machine::guest_lock_name(guest.policy()));
  lx["guest_spinlock"] = spinlock.policy;
  lx["guest_spinlock_line"] = spinlock.line;
  lx["guest_spinlock_why"] = spinlock.why;
  lx["kernel_lines"] = result.kernel_lines;
  lx["kernel_end"] = kernel_end_json(crash);
  j["linux"] = std::move(lx);

  j["outcome"] = linux_outcome_name(result, crash);
  j["mode"] = "linux";
  j["lock"] = spinlock.policy;
  j["vcpus"] = result.vcpus.size();
  j["pcpus"] = run_json["config"]["pcpus"];
  double cpu_seconds = 0;
  std::optional<std::uint64_t> steal_ns = 0, preemptions = 0;
  for (const auto& v : result.vcpus) {
    cpu_seconds += v.cpu_seconds;
    steal_ns = steal_ns && v.runqueue_wait_ns ? std::optional(*steal_ns + *v.runqueue_wait_ns) : std::nullopt;
    const auto reported = v.kvm.find("preemption_reported"), other = v.kvm.find("preemption_other");
    preemptions = preemptions && reported != v.kvm.end() && other != v.kvm.end()
                      ? std::optional(*preemptions + reported->second + other->second)
                      : std::nullopt;
  }
  const auto optional_json = [](const std::optional<std::uint64_t>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  j["cpu_seconds"] = cpu_seconds;
  j["steal_ns"] = optional_json(steal_ns);
  j["host_preemptions"] = optional_json(preemptions);
  j["kvm_totals"] = report::kvm_totals_json(result);
  // What a freestanding lock run has and a Linux run cannot: the VMM's PV
  // device (KVM handles the kernel's halts and kicks) and the guest's
  // window marks.
  j["vmm"] = nullptr;
  j["window_fairness"] = nullptr;
  j["cpu_seconds_window"] = nullptr;
  j["host"] = lockstat::host_info(kvm_kind);
  j["settings"] = run_json["settings"];
  j["vm"] = std::move(run_json);
  return j;
}

void print_init_lines(const linux_guest::InitReport& report, const linuxboot::KernelSpinlock& spinlock,
                      std::optional<machine::GuestLockPolicy> asked) {
  const bool differs = asked && spinlock.policy != machine::guest_lock_name(*asked);
  fmt::print("linux: the kernel uses {} spinlocks ({}){}\n", spinlock.policy, spinlock.why,
             differs ? fmt::format("; asked for {}", machine::guest_lock_name(*asked)) : "");
  if (report.cpus)
    fmt::print("linux: {} CPUs online ({})\n", report.cpus->sysfs.value_or(report.cpus->sysconf), report.cpus->list);
  if (report.result && report.result->elapsed_ns > 0) {
    const double seconds = static_cast<double>(report.result->elapsed_ns) * 1e-9;
    fmt::print("linux: {} {} operations in {:.3f} s on {} threads: {:.0f} ops/s\n", report.workload,
               report.result->ops, seconds, report.result->threads, static_cast<double>(report.result->ops) / seconds);
  }
  for (const auto& e : report.errors) fmt::print("linux: init error: {}\n", e);
  for (const auto& p : report.problems) fmt::print("linux: init report: {}\n", p);
}

void print_linux_summary(const PreparedLinuxGuest& guest, const linux_guest::InitReport& report,
                         const linuxboot::KernelSpinlock& spinlock, const machine::RunResult& result,
                         std::chrono::steady_clock::time_point origin) {
  if (const auto to_init = seconds_to_init(guest, origin)) fmt::print("linux: init after {:.3f} s\n", *to_init);
  print_init_lines(report, spinlock, guest.policy());
  fmt::print("kvm: halt exits {}, halt wake-ups {}, hypercalls {} (KICK_CPU and other PV calls), directed yields {}\n",
             report::kvm_stat_sum(result, "halt_exits"), report::kvm_stat_sum(result, "halt_wakeup"),
             report::kvm_stat_sum(result, "hypercalls"), report::kvm_stat_sum(result, "directed_yield_attempted"));
}

std::optional<machine::KernelEnd> take_kernel_end(machine::RunResult& result) {
  // A watchdog, a signal or a fault decided the end before any crash did.
  if (result.outcome != machine::Outcome::kCompleted) return std::nullopt;
  auto crash = machine::kernel_end(result.kernel_lines, result.reason);
  if (crash) {
    result.outcome = machine::Outcome::kGuestFault;
    result.reason = crash->line;
  }
  return crash;
}

std::string linux_outcome_name(const machine::RunResult& result, const std::optional<machine::KernelEnd>& crash) {
  return crash ? machine::kernel_end_name(crash->kind) : machine::outcome_name(result.outcome);
}

nlohmann::json kernel_end_json(const std::optional<machine::KernelEnd>& crash) {
  return crash ? nlohmann::json{{"kind", machine::kernel_end_name(crash->kind)}, {"line", crash->line}}
               : nlohmann::json(nullptr);
}

int init_exit_code(const linux_guest::InitReport& report) {
  if (!report.exit_status) return machine::exit_code(machine::Outcome::kGuestFault);
  if (*report.exit_status != 0) return machine::exit_code(machine::Outcome::kGuestFailed);
  if (!report.complete) return machine::exit_code(machine::Outcome::kGuestFault);
  return 0;
}

int linux_exit_code(const PreparedLinuxGuest& guest, const linux_guest::InitReport& report,
                    const machine::RunResult& result) {
  if (result.outcome != machine::Outcome::kCompleted) return 0;
  if (!guest.own_init()) return 0;
  return init_exit_code(report);
}

}  // namespace lockvisor::cli
