// lockvisor linux: lockvisor's Linux-guest parts for another VMM, so that a
// peer (QEMU, Firecracker, a libvirt guest) boots the same initramfs with the
// same command line and its console is read the way `lockvisor run --kernel`
// reads its own:
//   lockvisor linux initramfs --out FILE [--workload W] [--duration S] [--seed N]
//       writes lockvisor's initramfs and prints the kernel command line it needs;
//   lockvisor linux report CONSOLE_LOG [--json FILE]
//       parses the init's report from a guest console log: the same figures,
//       outcome and exit code as `lockvisor run --kernel` (0, 1 the workload
//       failed, 3 the init never finished or the kernel crashed).
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <optional>

#include "vmm/cli/commands.h"
#include "vmm/cli/linux_guest_run.h"
#include "vmm/cli/setting_options.h"
#include "vmm/linuxinit/init_report.h"
#include "vmm/linuxinit/kernel_spinlock.h"
#include "vmm/machine/linux_console.h"
#include "vmm/machine/run_result.h"
#include "vmm/report/run_report.h"
#include "vmm/util/error.h"
#include "vmm/util/input_file.h"
#include "vmm/util/file_identity.h"
#include "vmm/util/output_file.h"

namespace lockvisor::cli {
namespace {

// A console log can be as large as a run's --max-serial-bytes allows, and
// more from another VMM: bounded, like every input file.
constexpr std::uint64_t kMaxConsoleLogBytes = 256ull << 20;

struct LinuxCommandOptions {
  std::string out;
  std::string workload = "hello";
  double duration_s = 1.0;
  std::uint64_t seed = 1;
  std::string log;
  std::string json;
};

int write_initramfs(const LinuxCommandOptions& o) {
  if (!is_linux_workload(o.workload))
    fail("--workload {}: one of {}", o.workload, fmt::join(linux_workloads(), ", "));
  LinuxOptions lx;
  lx.workload = o.workload;
  lx.duration_ms = static_cast<std::uint64_t>(o.duration_s * 1000 + 0.5);
  OutputFile out(o.out, "--out");  // a bad path fails before anything is built
  const auto image = lockvisor_initramfs();
  out.write(std::string_view(reinterpret_cast<const char*>(image.data()), image.size()));
  fmt::print(stderr, "lockvisor linux initramfs: {} ({} KiB); boot it with this kernel command line:\n", o.out,
             (image.size() + 1023) / 1024);
  // Alone on stdout, so that a script can take it as it is.
  fmt::print("{}\n", init_command_line(lx, o.seed));
  return 0;
}

// Why the init's report gives the exit code it does (init_exit_code).
std::string init_reason(const linux_guest::InitReport& report) {
  if (!report.exit_status) return "lockvisor's init never reported its exit";
  if (*report.exit_status != 0) return fmt::format("lockvisor's init reported exit status {}", *report.exit_status);
  if (!report.complete) return "lockvisor's init exited, but its report is incomplete";
  return "lockvisor's init finished (exit status 0)";
}

// The outcome as `lockvisor run --kernel` names it: a kernel crash read from
// the log's own lines by the run's classifier (machine::kernel_end; a log
// shows no KVM exit, so a triple fault without a panic line goes unseen),
// else what the init reported.
int console_report(const LinuxCommandOptions& o) {
  refuse_shared_files({{"the console log", o.log}, {"--json", o.json}});
  std::optional<OutputFile> json;
  if (!o.json.empty()) json.emplace(o.json, "--json");
  const auto bytes = read_input_file(o.log, "console log", kMaxConsoleLogBytes);
  const std::string_view log(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const auto report = linux_guest::parse_init_report(log);
  const auto kernel_lines = machine::kept_kernel_lines(log);
  const auto crash = machine::kernel_end(kernel_lines, "");
  if (report.lines_seen == report.lines_ignored && !crash)
    fail("{}: no line of lockvisor's init and no kernel panic (was the guest booted with its initramfs?)", o.log);
  const auto spinlock = linuxboot::classify_kernel_spinlock(report.spinlock_log, true);
  const int code = crash ? machine::exit_code(machine::Outcome::kGuestFault) : init_exit_code(report);
  const std::string outcome = crash ? machine::kernel_end_name(crash->kind) : machine::outcome_for_exit_code(code);
  print_init_lines(report, spinlock, std::nullopt);
  fmt::print("outcome: {} (exit code {}): {}\n", outcome, code, crash ? crash->line : init_reason(report));
  if (json) {
    auto j = linux_guest::init_report_json(report);
    j["outcome"] = outcome;
    j["linux"] = {{"guest_spinlock", spinlock.policy}, {"guest_spinlock_line", spinlock.line},
                  {"guest_spinlock_why", spinlock.why}, {"kernel_lines", kernel_lines},
                  {"kernel_end", kernel_end_json(crash)}, {"console_log", o.log}};
    report::write_json_file(*json, j);
  }
  return code;
}

}  // namespace

Action add_linux_command(CLI::App& app) {
  auto o = std::make_shared<LinuxCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "linux", "lockvisor's Linux-guest parts for another VMM: its initramfs, and its reader of the guest's console");
  command->require_subcommand(1);
  CLI::App* initramfs = command->add_subcommand(
      "initramfs", "Write lockvisor's initramfs (its /init runs one kernel-lock workload) and print the kernel "
                   "command line it needs");
  initramfs->add_option("--out", o->out, "The cpio file to write")->required();
  initramfs->add_option("-w,--workload", o->workload, "futex-hash, lockref, pipe, spawn, hello or idle")
      ->default_str("hello");
  apply_setting_checks(initramfs->add_option("--duration", o->duration_s, "Seconds the workload runs"),
                       setting_row("duration_s"));
  apply_setting_checks(initramfs->add_option("--seed", o->seed, "The workload's seed"), setting_row("seed"));
  CLI::App* report = command->add_subcommand(
      "report", "Read lockvisor's init report from a guest console log (e.g. QEMU's -serial file:LOG): the same "
                "figures and exit code as `lockvisor run --kernel`");
  report->add_option("log", o->log, "The console log")->required();
  report->add_option("--json", o->json, "Write the figures as JSON (the fields of a Linux run report)");
  return [o, initramfs] { return initramfs->parsed() ? write_initramfs(*o) : console_report(*o); };
}

}  // namespace lockvisor::cli
