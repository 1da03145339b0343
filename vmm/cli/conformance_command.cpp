// lockvisor conformance: the PV-lock hypercall conformance suite.
#include <fmt/format.h>

#include <memory>
#include <optional>

#include "vmm/cli/commands.h"
#include "vmm/cli/option_checks.h"
#include "vmm/conformance/suite.h"
#include "vmm/guest_image.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/report/run_report.h"
#include "vmm/util/error.h"
#include "vmm/util/output_file.h"

namespace lockvisor::cli {
namespace {

struct ConformanceOptions {
  std::string json;
  std::string filter;
  std::string image;
  bool list = false;
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
  fmt::print("lockvisor conformance: {} cases on KVM {}\n", cases.size(), kvm::backend_name(kvm::detect_backend()));
  std::vector<conformance::CaseResult> results;
  std::size_t passed = 0;
  for (const auto& spec : cases) {
    std::fflush(stdout);
    auto result = conformance::run_case(kvm, spec, image);
    passed += result.passed ? 1 : 0;
    fmt::print("{} {:<34} {:6.2f} s  {}\n", result.passed ? "PASS" : "FAIL", result.name, result.seconds,
               result.reason);
    results.push_back(std::move(result));
  }
  fmt::print("{} passed, {} failed\n", passed, results.size() - passed);
  if (json) report::write_json_file(*json, conformance::results_to_json(results));
  return passed == results.size() ? 0 : 1;
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
  return [options] { return run(*options); };
}

}  // namespace lockvisor::cli
