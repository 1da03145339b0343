// lockvisor conformance: the PV-lock hypercall conformance suite, or with
// --linux KERNEL the Linux case group (a distribution kernel as the client).
#include <fmt/format.h>

#include <memory>
#include <optional>

#include "vmm/cli/commands.h"
#include "vmm/cli/linux_guest_run.h"
#include "vmm/cli/option_checks.h"
#include "vmm/conformance/linux_cases.h"
#include "vmm/conformance/suite.h"
#include "vmm/guest_image.h"
#include "vmm/host/emulation.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/lockstat/lock_run.h"
#include "vmm/machine/machine.h"
#include "vmm/report/run_report.h"
#include "vmm/report/settings_json.h"
#include "vmm/util/error.h"
#include "vmm/util/input_file.h"
#include "vmm/util/output_file.h"
#include "vmm/util/scratch_dir.h"

namespace lockvisor::cli {
namespace {

struct ConformanceOptions {
  std::string json;
  std::string filter;
  std::string image;
  bool list = false;
  std::string backend = "userspace";
  conformance::SuiteOptions suite;
  conformance::LinuxKernels linux_kernels;  // --linux, --linux-cloud
};

// The cases whose name contains --filter; with --list, printed. Both case
// groups: nullopt when the command is done (listed).
template <class Case>
std::optional<std::vector<Case>> select_cases(std::vector<Case> cases, const ConformanceOptions& o) {
  std::erase_if(cases, [&](const auto& c) { return c.name.find(o.filter) == std::string::npos; });
  if (o.list) {
    for (const auto& c : cases) fmt::print("{:<34} {}\n", c.name, c.summary);
    return std::nullopt;
  }
  if (cases.empty()) fail("--filter '{}' matches no case (see --list)", o.filter);
  return cases;
}

// Runs the cases in order, one line each as it ends (with the last lines of
// a failed child run's output under it), then the totals line.
template <class Case, class RunOne>
std::vector<conformance::CaseResult> run_cases(const std::vector<Case>& cases, RunOne run_one,
                                               const std::string& not_applicable_to) {
  std::vector<conformance::CaseResult> results;
  for (const auto& c : cases) {
    std::fflush(stdout);
    auto result = run_one(c);
    fmt::print("{} {:<34} {:6.2f} s  {}\n", !result.applicable ? "N/A " : result.passed ? "PASS" : "FAIL", result.name,
               result.seconds, result.reason);
    for (const auto& line : result.details) fmt::print("      | {}\n", line);
    results.push_back(std::move(result));
  }
  const auto t = conformance::tally(results);
  fmt::print("{} passed, {} failed, {} not applicable{}\n", t.passed, t.failed, t.not_applicable, not_applicable_to);
  return results;
}

int exit_code_of(const std::vector<conformance::CaseResult>& results) {
  return conformance::tally(results).failed == 0 ? 0 : 1;
}

int run_freestanding(const ConformanceOptions& o) {
  auto cases = select_cases(conformance::all_cases(o.suite), o);
  if (!cases) return 0;
  std::optional<OutputFile> json;  // checked before the suite runs, not after
  if (!o.json.empty()) json.emplace(o.json, "--json");
  std::vector<std::byte> storage;
  const auto image = select_guest_image(o.image, storage);
  machine::MachineConfig base;
  base.backend_kind = o.suite.backend;
  machine::validate_image(base, image);  // --image /bin/ls: one line, exit 2, not a failure per case
  const auto kvm = kvm::KvmSystem::open();
  machine::validate_host(base, kvm);  // --backend kvm on PVM: one line, exit 2, before any case
  const char* backend = pvlock::backend_kind_name(o.suite.backend);
  const std::string kvm_kind = kvm::backend_name(kvm::detect_backend());
  fmt::print("lockvisor conformance: {} cases, backend {}, on KVM {}\n", cases->size(), backend, kvm_kind);
  host::print_emulation_warning(stdout);
  const auto results = run_cases(
      *cases, [&](const auto& spec) { return conformance::run_case(kvm, spec, image); },
      fmt::format(" to backend {}", backend));
  auto out = conformance::results_to_json(results);
  out["settings"] = report::settings_json(base);
  out["host"] = lockstat::host_info(kvm_kind);
  if (json) report::write_json_file(*json, out);
  return exit_code_of(results);
}

// --linux: each case a child `lockvisor run --kernel` (conformance/linux_cases.h).
int run_linux(ConformanceOptions o) {
  auto& kernels = o.linux_kernels;
  if (o.list) {
    select_cases(conformance::linux_cases(kernels), o);
    return 0;
  }
  // Every mistake on the command line first, so that it is found (and
  // tested) on every host; then the host itself, before anything runs.
  read_input_file(kernels.kernel, "--linux", kMaxKernelBytes);
  if (!kernels.cloud.empty()) read_input_file(kernels.cloud, "--linux-cloud", kMaxKernelBytes);
  const ScratchDir scratch("lockvisor-linux-conformance", "the Linux cases' reports");
  kernels.truncated = (scratch.path() / "truncated").string();
  auto cases = select_cases(conformance::linux_cases(kernels), o);
  std::optional<OutputFile> json;
  if (!o.json.empty()) json.emplace(o.json, "--json");
  machine::refuse_linux_on_pvm("--linux");
  const double timeout_s = o.suite.case_timeout_s;
  const std::string kvm_kind = kvm::backend_name(kvm::detect_backend());
  fmt::print("lockvisor conformance: {} Linux case{}, kernel {}, backend kvm, on KVM {}\n", cases->size(),
             cases->size() == 1 ? "" : "s", kernels.kernel, kvm_kind);
  host::print_emulation_warning(stdout);
  const auto results = run_cases(
      *cases,
      [&](const conformance::LinuxCase& c) {
        auto result = conformance::run_linux_case(c, "/proc/self/exe", scratch.path(), timeout_s);
        machine::throw_if_stop_signalled();  // a stopped child is no failed case: the command ends
        return result;
      },
      "");
  auto out = conformance::results_to_json(results);
  out["linux"] = {{"kernel", kernels.kernel},
                  {"cloud_kernel", kernels.cloud.empty() ? nlohmann::json(nullptr) : nlohmann::json(kernels.cloud)},
                  {"case_timeout_s", timeout_s}};
  out["host"] = lockstat::host_info(kvm_kind);
  if (json) report::write_json_file(*json, out);
  return exit_code_of(results);
}

}  // namespace

Action add_conformance_command(CLI::App& app) {
  auto options = std::make_shared<ConformanceOptions>();
  CLI::App* command = app.add_subcommand("conformance", "Run the PV-lock hypercall conformance suite on /dev/kvm");
  command->add_option("--json", options->json,
                      "Write the results as JSON to FILE"
                      " (absent or a regular file, checked first; replaced atomically)");
  command->add_option("--filter", options->filter, "Run only the cases whose name contains TEXT");
  command->add_flag("--list", options->list, "List the cases and exit");
  command
      ->add_option("--pingpong-rounds", options->suite.pingpong_rounds,
                   "Rounds of the 2-vCPU ping-pong cases, up to 10^9")
      ->transform(unsigned_in(1, 1000000000));
  command->add_option("--case-timeout", options->suite.case_timeout_s, "Watchdog per case, seconds (0.001..1e6)")
      ->check(seconds_in(0.001, 1e6));
  command->add_option("--image", options->image, "Guest ELF image (default: the built-in one)");
  command
      ->add_option("--backend", options->backend,
                   "PV backend every case runs with: userspace or kvm (KVM's in-kernel KICK_CPU; not on PVM); cases "
                   "that make no sense for a backend are reported N/A")
      ->check(CLI::IsMember({"userspace", "kvm"}));
  // The Linux case group: instead of the freestanding cases, with --list,
  // --filter, --json and --case-timeout (the watchdog per child run) as there.
  auto* linux_option =
      command->add_option("--linux", options->linux_kernels.kernel,
                          "Run the Linux case group instead: boot this kernel (a bzImage) under each --guest-lock "
                          "policy and bad variants of it, one child `lockvisor run --kernel` per case (not on PVM)");
  command
      ->add_option("--linux-cloud", options->linux_kernels.cloud,
                   "With --linux: a kernel that finds its CPUs through ACPI only (Debian's cloud-amd64); without "
                   "it that case is N/A")
      ->needs(linux_option);
  for (const char* freestanding : {"--image", "--backend", "--pingpong-rounds"})
    linux_option->excludes(command->get_option(freestanding));
  return [options, linux_option] {
    options->suite.backend = options->backend == "kvm" ? pvlock::BackendKind::kKvm : pvlock::BackendKind::kUserspace;
    return linux_option->count() > 0 ? run_linux(*options) : run_freestanding(*options);
  };
}

}  // namespace lockvisor::cli
