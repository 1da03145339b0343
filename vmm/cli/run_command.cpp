// lockvisor run: boot the guest with one workload and report what happened.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <memory>

#include "vmm/cli/commands.h"
#include "vmm/cli/machine_options.h"
#include "vmm/guest_image.h"
#include "vmm/host/cpu_set.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/machine/machine.h"
#include "vmm/report/run_report.h"
#include "vmm/util/error.h"

namespace lockvisor::cli {
namespace {

struct RunOptions {
  MachineOptions machine;
  std::string workload = "pingpong";
  std::uint64_t rounds = 0;
  std::uint64_t spin = 0;
  std::string halt = "hypercall";
  std::vector<std::string> params;
  std::string json;
};

// Workloads of the built-in image that `run` offers (the conformance
// programs are driven by `lockvisor conformance`).
const std::vector<std::string> kWorkloads = {"pingpong", "hello", "empty"};

int run(RunOptions& o) {
  o.machine.finish();
  auto& config = o.machine.config;
  config.program = o.workload;
  std::string args;
  if (o.rounds > 0) args += fmt::format("rounds={} ", o.rounds);
  if (o.spin > 0) args += fmt::format("spin={} ", o.spin);
  if (o.halt != "hypercall") args += fmt::format("halt={} ", o.halt);
  for (const auto& p : o.params) {
    if (p.find('=') == std::string::npos || p.find(' ') != std::string::npos)
      fail("--param '{}': expected key=value without spaces", p);
    args += p + ' ';
  }
  if (!args.empty()) args.pop_back();
  config.args = args;

  machine::validate_config(config);
  std::vector<std::byte> storage;
  const auto image = select_guest_image(o.machine.image, storage);
  machine::validate_image(config, image);
  const auto kvm = kvm::KvmSystem::open();
  const auto origin = std::chrono::steady_clock::now();
  machine::Machine vm(kvm, config, image, origin);
  fmt::print("lockvisor run: workload {} ({}), {} vCPUs on host CPUs {} ({}), kick {}, KVM {}\n", o.workload,
             args.empty() ? "defaults" : args, config.vcpus,
             host::format_cpu_list(config.pcpus.empty() ? host::allowed_cpus() : config.pcpus),
             config.pcpus.empty() ? "unpinned" : o.machine.pin,
             o.machine.kick, kvm::backend_name(kvm::detect_backend()));
  std::fflush(stdout);
  const auto result = vm.run();
  fmt::print("outcome: {} (exit code {}): {}\n", machine::outcome_name(result.outcome), machine::exit_code(result.outcome),
             result.reason);
  for (const auto& line : result.details) fmt::print("  {}\n", line);
  fmt::print("wall {:.3f} s, first guest entry after {:.1f} ms, first exit after {:.1f} ms\n", result.wall_seconds,
             result.seconds_to_first_entry * 1e3, result.seconds_to_first_exit * 1e3);
  report::print_run_table(result, stdout);
  for (unsigned i = 0; i < result.vcpus.size(); ++i)
    if (const auto* elapsed = result.result(i, "elapsed_ns"); elapsed && i == 0 && o.workload == "pingpong") {
      const double seconds = static_cast<double>(elapsed->values[0]) * 1e-9;
      const std::uint64_t handoffs = (o.rounds ? o.rounds : 1000) * result.vcpus.size();
      fmt::print("pingpong: {} hand-offs in {:.3f} s (guest clock): {:.1f} us per hand-off\n", handoffs, seconds,
                 seconds * 1e6 / static_cast<double>(handoffs));
    }
  if (!o.json.empty()) report::write_json_file(o.json, report::run_to_json(result, config));
  return machine::exit_code(result.outcome);
}

}  // namespace

Action add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* command = app.add_subcommand("run", "Boot a guest running one workload and report per-vCPU statistics");
  command->add_option("-w,--workload", options->workload, "Workload to run")->check(CLI::IsMember(kWorkloads));
  command->add_option("--rounds", options->rounds, "pingpong: turns each vCPU takes (default 1000)");
  command->add_option("--spin", options->spin, "pingpong: pause iterations before halting");
  command->add_option("--halt", options->halt, "pingpong: hypercall (CPL3 HALT) or kernel (`hlt` at CPL0)")
      ->check(CLI::IsMember({"hypercall", "kernel"}));
  command->add_option("--param", options->params, "Extra workload parameter key=value (repeatable)");
  command->add_option("--json", options->json, "Write the full report as JSON to FILE");
  options->machine.add_to(*command);
  return [options] { return run(*options); };
}

}  // namespace lockvisor::cli
