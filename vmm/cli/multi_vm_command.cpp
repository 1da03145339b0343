// lockvisor run --vm SPEC [--vm SPEC ...]: the command-line side of several
// VMs side by side (the running side: vmm/multivm/multi_vm_run.h).
//
// SPEC syntax (docs/multi-vm.md): key=value[,key=value...]. A key is one of
// `run`'s long option names without the dashes ('_' may stand for '-'), or
// `label`. A switch takes true or false. `pcpus` may list CPUs with commas
// (pcpus=0,2-3): a token without '=' that is a CPU range continues it. Every
// option outside the --vm options applies to every VM; a key in the spec
// replaces it for that VM (param adds to it).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string_view>
#include <unistd.h>

#include "vmm/cli/commands.h"
#include "vmm/experiment/run_settings.h"
#include "vmm/host/cpu_set.h"
#include "vmm/host/emulation.h"
#include "vmm/host/host_cpus.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/lockstat/lock_run.h"
#include "vmm/machine/run_result.h"
#include "vmm/multivm/multi_vm_run.h"
#include "vmm/report/run_report.h"
#include "vmm/util/error.h"
#include "vmm/util/file_identity.h"
#include "vmm/util/output_file.h"
#include "vmm/util/top_level_comma.h"

namespace lockvisor::cli {
namespace {

// How a --vm spec treats `run`'s option NAME (long name, no dashes): the
// row's scope (vmm/experiment/run_settings.cpp); CLI11's --help is no key.
experiment::VmScope vm_scope(const std::string& name) {
  const auto* row = experiment::find_run_setting_by_flag("--" + name);
  if (row != nullptr) return row->vm;
  return name == "help" ? experiment::VmScope::kNotPerVm : experiment::VmScope::kPerVm;
}
bool not_per_vm(const std::string& name) { return vm_scope(name) == experiment::VmScope::kNotPerVm; }
bool own_path(const std::string& name) { return vm_scope(name) == experiment::VmScope::kOwnPath; }

bool is_switch(const CLI::Option& option) { return option.get_expected_max() == 0; }

std::string long_name(const CLI::Option& option) {
  const auto& names = option.get_lnames();
  return names.empty() ? std::string() : names.front();
}

// One option and its values, as `run` arguments take it.
struct Given {
  std::string name;  // long name, no dashes
  bool is_switch = false;
  std::vector<std::string> values;  // a switch: empty
};

std::vector<std::string> flatten(const std::vector<Given>& options) {
  std::vector<std::string> args;
  for (const auto& g : options) {
    if (g.is_switch) {
      args.push_back("--" + g.name);
      continue;
    }
    for (const auto& v : g.values) {
      args.push_back("--" + g.name);
      args.push_back(v);
    }
  }
  return args;
}

// The options given outside any --vm, in the order `run` declares them.
std::vector<Given> common_options(const CLI::App& run) {
  std::vector<Given> given;
  for (const CLI::Option* option : run.get_options()) {
    const auto name = long_name(*option);
    if (name.empty() || not_per_vm(name) || option->count() == 0) continue;
    given.push_back({name, is_switch(*option), is_switch(*option) ? std::vector<std::string>{} : option->results()});
  }
  return given;
}

bool cpu_range_text(const std::string& token) {
  return !token.empty() && token.find_first_not_of("0123456789-") == std::string::npos;
}

bool valid_label(const std::string& label) {
  return !label.empty() && label.size() <= 32 &&
         label.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == std::string::npos;
}

struct SpecEntry {
  std::string key, value;
};

// Splits SPEC into key=value entries; `where` names the --vm in messages.
std::vector<SpecEntry> split_spec(const std::string& spec, const std::string& where) {
  if (spec.empty()) fail("{}: empty; expected key=value[,key=value...]", where);
  std::vector<SpecEntry> entries;
  std::size_t start = 0;
  while (start <= spec.size()) {
    // A comma inside parentheses belongs to the value (pcpus=max(2cpus,1/8)).
    const auto comma = find_top_level_comma(spec, start);
    const auto token = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    const auto eq = token.find('=');
    if (eq == std::string::npos) {
      if (!entries.empty() && entries.back().key == "pcpus" && cpu_range_text(token)) {
        entries.back().value += "," + token;
        continue;
      }
      fail("{}: '{}' is not key=value", where, token);
    }
    auto key = token.substr(0, eq);
    std::replace(key.begin(), key.end(), '_', '-');
    if (key.empty()) fail("{}: '{}' has no key before '='", where, token);
    entries.push_back({key, token.substr(eq + 1)});
  }
  return entries;
}

std::string key_list(const CLI::App& run) {
  std::string keys = "label";
  for (const CLI::Option* option : run.get_options()) {
    const auto name = long_name(*option);
    if (!name.empty() && !not_per_vm(name) && !option->get_group().empty()) keys += ", " + name;
  }
  return keys;
}

// The VM's arguments: the common options, with the spec's replacing
// (or, for param, adding to) those of the same name.
std::vector<Given> merge(std::vector<Given> common, const std::vector<Given>& own) {
  for (const auto& g : own) {
    if (g.name == "param") continue;
    common.erase(std::remove_if(common.begin(), common.end(), [&](const Given& c) { return c.name == g.name; }),
                 common.end());
  }
  for (const auto& g : own) {
    auto it = std::find_if(common.begin(), common.end(), [&](const Given& c) { return c.name == g.name; });
    if (g.name == "param" && it != common.end()) it->values.insert(it->values.end(), g.values.begin(), g.values.end());
    else if (!(g.is_switch && g.values.size() == 1 && g.values.front() == "false")) common.push_back(g);
  }
  for (auto& g : common)
    if (g.is_switch) g.values.clear();
  return common;
}

}  // namespace

std::vector<multivm::VmPlan> plan_vms(const CLI::App& run, const std::vector<std::string>& specs,
                                      bool host_checks) {
  for (const char* own : {"native", "start-gate-fd"})
    if (run.get_option(std::string("--") + own)->count() > 0)
      fail("--vm runs VMs; --{} cannot be combined with it", own);
  const auto common = common_options(run);
  // A file or socket shared by several VMs would be written (or bound) by
  // all of them: the last trace would replace the others, the second
  // control socket would find the first one live and fail its VM.
  for (const auto& g : common)
    if (own_path(g.name))
      fail("--{} outside --vm: every VM would use that {}; give {}=PATH per --vm", g.name,
           g.name == "api" ? "socket" : "file", g.name);
  std::vector<std::string> own_paths;
  std::vector<multivm::VmPlan> plans;
  std::set<std::string> labels;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const auto where = fmt::format("--vm {} '{}'", i + 1, specs[i]);
    multivm::VmPlan plan;
    plan.spec = specs[i];
    std::vector<Given> own;
    for (const auto& [key, value] : split_spec(specs[i], where)) {
      if (key == "label") {
        if (!plan.label.empty()) fail("{}: label given twice", where);
        if (!valid_label(value)) fail("{}: label '{}': 1-32 characters of A-Z a-z 0-9 _ . -", where, value);
        plan.label = value;
        continue;
      }
      const CLI::Option* option = run.get_option_no_throw("--" + key);
      if (option == nullptr || not_per_vm(key) || option->get_group().empty())
        fail("{}: unknown key '{}' (keys: {})", where, key, key_list(run));
      const auto name = long_name(*option);
      auto it = std::find_if(own.begin(), own.end(), [&](const Given& g) { return g.name == name; });
      if (it != own.end() && name != "param") fail("{}: key '{}' given twice", where, key);
      if (is_switch(*option) && value != "true" && value != "false")
        fail("{}: {}={}: a switch takes true or false", where, key, value);
      if (it != own.end()) it->values.push_back(value);
      else own.push_back({name, is_switch(*option), {value}});
    }
    for (const auto& g : own) {
      if (!own_path(g.name)) continue;
      // However spelt (./s, a symlink): one file, one VM.
      const std::string& path = g.values.front();
      if (std::any_of(own_paths.begin(), own_paths.end(), [&](const std::string& p) { return same_file(p, path); }))
        fail("{}: {}={}: another VM uses that path", where, g.name, path);
      own_paths.push_back(path);
    }
    if (plan.label.empty()) plan.label = fmt::format("vm{}", i + 1);
    if (!labels.insert(plan.label).second) fail("{}: label '{}' is already another VM's", where, plan.label);
    plan.args = flatten(merge(common, own));
    CheckedRun checked;
    try {
      checked = check_run_arguments(plan.args, host_checks);
    } catch (const Error& e) {
      // The options every VM shares may be wrong on their own (--kernel on
      // PVM): then no key of this VM is to blame.
      try {
        check_run_arguments(flatten(common), host_checks);
      } catch (const Error& shared) {
        if (std::string_view(shared.what()) == e.what()) fail("{}", e.what());
      }
      // Name the key when one value is wrong on its own (vcpus=0); otherwise
      // it is the combination (lock=pvticket with no-pv=true).
      for (const auto& g : own)
        for (const auto& value : g.values) {
          try {
            check_run_arguments(flatten(merge(common, {{g.name, g.is_switch, {value}}})), host_checks);
          } catch (const Error& alone) {
            fail("{}: {}={}: {}", where, g.name, value, alone.what());
          }
        }
      fail("{}: {}", where, e.what());
    }
    // Every VM has a watchdog: the parent's own bound on a hung child
    // follows from it (multivm/multi_vm_run.h).
    if (checked.timeout_s == 0) {
      checked.timeout_s = multivm::kDefaultVmTimeoutS;
      plan.args.insert(plan.args.end(), {std::string("--timeout"), fmt::format("{}", multivm::kDefaultVmTimeoutS)});
    }
    plan.timeout_s = checked.timeout_s;
    plan.workload = checked.workload;
    plan.lock = checked.lock;
    plan.vcpus = checked.vcpus;
    plans.push_back(std::move(plan));
  }
  return plans;
}

int run_multi_vm(const CLI::App& run, const std::vector<std::string>& specs, unsigned hogs, const std::string& json_path) {
  multivm::MultiRunOptions options;
  options.vms = plan_vms(run, specs);
  options.hogs = hogs;
  if (const auto* pcpus = run.get_option("--pcpus"); pcpus->count() > 0)
    options.hog_cpus = host::resolve_pcpus_option(pcpus->results().back());
  // Checked before anything runs, as a single run checks it.
  std::optional<OutputFile> json;
  if (!json_path.empty()) json.emplace(json_path, "--json");
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) fail_host("cannot find this executable (/proc/self/exe)");
  options.lockvisor.assign(self, static_cast<std::size_t>(n));
  std::string labels;
  for (const auto& vm : options.vms) labels += (labels.empty() ? "" : ", ") + vm.label;
  fmt::print("lockvisor run: {} VMs side by side ({}){}; building, then starting them together\n", options.vms.size(),
             labels, hogs ? fmt::format(", {} host CPU hogs", hogs) : "");
  host::print_emulation_warning(stdout);
  std::fflush(stdout);
  // The host every VM ran on, as a single run's report describes it (each
  // VM's own report, under "result", has it too).
  const auto host = lockstat::host_info(kvm::backend_name(kvm::detect_backend()));
  const auto result = multivm::run_vms(options);
  // A VM whose own run refused its command line on this host (a --serial
  // that is a directory, an --image that is no guest) failed before the start
  // gate: that is said as a single run says it, one line on stderr and exit
  // 2, without a report of VMs that never ran.
  const int usage = machine::exit_code(machine::Outcome::kUsageError);
  if (result.gate_opened_ns == 0)
    for (std::size_t i = 0; i < result.vms.size(); ++i) {
      const auto& vm = result.vms[i];
      if (!vm.stopped_by.empty() || vm.exit_code != usage) continue;
      constexpr std::string_view kError = "lockvisor: error: ";
      std::string_view why = vm.reason;
      for (std::size_t at = 0; at < vm.log.size();) {
        const std::size_t end = std::min(vm.log.find('\n', at), vm.log.size());
        const std::string_view line(vm.log.data() + at, end - at);
        if (line.starts_with(kError)) why = line.substr(kError.size());
        at = end + 1;
      }
      fmt::print(stderr, "lockvisor: error: --vm {} '{}': {}\n", i + 1, vm.spec, why);
      return usage;
    }
  int code = result.exit_code;
  bool json_failed = false;
  if (json) {
    try {
      auto doc = multivm::to_json(result);
      doc["host"] = host;
      report::write_json_file(*json, doc);
    } catch (const Error& e) {
      json_failed = true;
      code = std::max(code, machine::exit_code(machine::Outcome::kHostError));
      fmt::print(stderr, "lockvisor: error: {}\n", e.what());
    }
  }
  multivm::print_report(result, stdout);
  if (json_failed) fmt::print("--json not written (exit code {})\n", code);
  return code;
}

}  // namespace lockvisor::cli
