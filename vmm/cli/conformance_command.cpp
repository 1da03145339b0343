// lockvisor conformance: the PV-lock hypercall conformance suite.
#include <fmt/format.h>

#include <memory>
#include <optional>

#include "vmm/cli/commands.h"
#include "vmm/cli/option_checks.h"
#include "vmm/conformance/suite.h"
#include "vmm/guest_image.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/machine/machine.h"
#include "vmm/report/run_report.h"
#include "vmm/report/settings_json.h"
#include "vmm/util/error.h"
#include "vmm/util/output_file.h"

namespace lockvisor::cli {
namespace {

struct ConformanceOptions {
  std::string json;
  std::string filter;
  std::string image;
  bool list = false;
  std::string backend = "userspace";
  conformance::SuiteOptions suite;
};

int run(const ConformanceOptions& o) {
  auto cases = conformance::all_cases(o.suite);
  std::erase_if(cases, [&](const auto& c) { return c.name.find(o.filter) == std::string::npos; });
  if (o.list) {
    for (const auto& c : cases) fmt::print("{:<34} {}\n", c.name, c.summary);
    return 0;
  }
  if (cases.empty()) fail("--filter '{}' matches no case (see --list)", o.filter);
  std::optional<OutputFile> json;  // checked before the suite runs, not after
  if (!o.json.empty()) json.emplace(o.json, "--json");
  std::vector<std::byte> storage;
  const auto image = select_guest_image(o.image, storage);
  const auto kvm = kvm::KvmSystem::open();
  machine::MachineConfig base;
  base.backend_kind = o.suite.backend;
  machine::validate_host(base, kvm);  // --backend kvm on PVM: one line, exit 2, before any case
  fmt::print("lockvisor conformance: {} cases, backend {}, on KVM {}\n", cases.size(),
             pvlock::backend_kind_name(o.suite.backend), kvm::backend_name(kvm::detect_backend()));
  std::vector<conformance::CaseResult> results;
  std::size_t passed = 0;
  std::size_t not_applicable = 0;
  for (const auto& spec : cases) {
    std::fflush(stdout);
    auto result = conformance::run_case(kvm, spec, image);
    passed += result.passed ? 1 : 0;
    not_applicable += result.applicable ? 0 : 1;
    fmt::print("{} {:<34} {:6.2f} s  {}\n", !result.applicable ? "N/A " : result.passed ? "PASS" : "FAIL", result.name,
               result.seconds, result.reason);
    results.push_back(std::move(result));
  }
  const std::size_t failed = results.size() - passed - not_applicable;
  fmt::print("{} passed, {} failed, {} not applicable to backend {}\n", passed, failed, not_applicable,
             pvlock::backend_kind_name(o.suite.backend));
  auto out = conformance::results_to_json(results);
  out["settings"] = report::settings_json(base);
  if (json) report::write_json_file(*json, out);
  return failed == 0 ? 0 : 1;
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
  return [options] {
    options->suite.backend = options->backend == "kvm" ? pvlock::BackendKind::kKvm : pvlock::BackendKind::kUserspace;
    return run(*options);
  };
}

}  // namespace lockvisor::cli
