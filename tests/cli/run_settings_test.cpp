// The run-settings table (vmm/experiment/run_settings.h) against what it
// describes: `run`'s options (read from `run --help`), the variables'
// defaults (WorkloadSettings, MachineConfig, the guest ABI's rows), the
// lab's settings and the JSON report's `settings`.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <string>

#include <fmt/format.h>

#include "lockvisor/abi/workload_limits.h"
#include "vmm/experiment/run_settings.h"
#include "vmm/experiment/workload_settings.h"
#include "vmm/lab/settings.h"
#include "vmm/machine/machine_config.h"
#include "vmm/pvlock/halt_poll.h"
#include "vmm/report/settings_json.h"

namespace lockvisor {
namespace {

using experiment::run_settings;
using experiment::RunSetting;
using experiment::SettingTarget;
using experiment::SettingType;

struct Outcome {
  int exit_code;
  std::string output;
};

Outcome lockvisor(const std::string& args) {
  std::FILE* pipe = ::popen((std::string(LOCKVISOR_BINARY) + " " + args + " 2>&1").c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> buffer{};
  while (pipe != nullptr && std::fgets(buffer.data(), buffer.size(), pipe)) out += buffer.data();
  const int status = pipe != nullptr ? ::pclose(pipe) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string run_help() {
  std::FILE* pipe = ::popen((std::string(LOCKVISOR_BINARY) + " run --help 2>&1").c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> buffer{};
  while (pipe != nullptr && std::fgets(buffer.data(), buffer.size(), pipe)) out += buffer.data();
  if (pipe != nullptr) {
    EXPECT_EQ(::pclose(pipe), 0) << out;
  }
  return out;
}

// --flag -> the text after it up to the help ("UINT:0..16=1").
std::map<std::string, std::string> help_options(const std::string& help) {
  std::map<std::string, std::string> options;
  // The type column ends at two spaces or the line's end ("FLOAT:0.001..3600 s=1").
  const std::regex line(R"(^\s+(?:-\w,)?(--[a-z0-9-]+)( (?:\S| (?! ))+)?)");
  std::size_t start = 0;
  while (start < help.size()) {
    const auto end = help.find('\n', start);
    const auto text = help.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::smatch m;
    if (std::regex_search(text, m, line)) options[m[1]] = m[2].matched ? m[2].str().substr(1) : "";
    start = end == std::string::npos ? help.size() : end + 1;
  }
  return options;
}

TEST(RunSettings, EveryRunOptionIsOneRowAndEveryRowAnOption) {
  const auto options = help_options(run_help());
  std::set<std::string> rows;
  for (const RunSetting& s : run_settings()) {
    EXPECT_TRUE(rows.insert(s.flag).second) << "two rows for " << s.flag;
    EXPECT_NE(experiment::find_run_setting(s.key), nullptr);
    if (std::string(s.key) == "start_gate_fd") continue;  // hidden: the multi-VM parent's
    EXPECT_TRUE(options.count(s.flag)) << s.flag << " is a row but not an option of run";
  }
  for (const auto& [flag, type] : options) {
    if (flag == "--help" || flag.rfind("--max-", 0) == 0) continue;  // CLI11's; the guest limits (limit_options.cpp)
    EXPECT_TRUE(rows.count(flag)) << flag << " is an option of run without a row";
  }
}

TEST(RunSettings, HelpShowsEachRowsRangeAndDefault) {
  const auto options = help_options(run_help());
  for (const RunSetting& s : run_settings()) {
    if (!options.count(s.flag)) continue;
    const auto& shown = options.at(s.flag);
    const auto range = experiment::range_text(s);
    if (!range.empty()) {
      EXPECT_NE(shown.find(range), std::string::npos) << s.flag << ": '" << shown << "' lacks " << range;
    }
    if (s.def != nullptr) {
      EXPECT_NE(shown.find(std::string("=") + s.def), std::string::npos) << s.flag << ": " << shown;
    }
    if (s.type == SettingType::kChoice) {
      const auto choices = "{" + std::regex_replace(std::string(s.choices), std::regex("\\|"), ",") + "}";
      EXPECT_NE(shown.find(choices), std::string::npos) << s.flag << ": " << shown;
    }
  }
}

// A range is the row's: --help shows it after the type, so the help text
// itself does not say it again (where a second copy would drift).
TEST(RunSettings, HelpTextsLeaveRangesToTheRow) {
  for (const RunSetting& s : run_settings()) {
    if (experiment::range_text(s).empty()) continue;
    const std::string help = s.help;
    for (const char* words : {"at most", "..", "10^"})
      EXPECT_EQ(help.find(words), std::string::npos) << s.flag << " says '" << words << "' in its help: " << help;
    const auto max = s.type == SettingType::kSeconds ? fmt::format("{}", s.max_s) : std::to_string(s.max);
    EXPECT_EQ(help.find(max), std::string::npos) << s.flag << " repeats its maximum " << max << ": " << help;
  }
}

// The rows' defaults are the variables' initial values: what run, bench and
// the tests get without an option is what --help says.
TEST(RunSettings, DefaultsAreTheVariablesInitialValues) {
  const experiment::WorkloadSettings w;
  const machine::MachineConfig m;
  const auto def = [](const char* key) {
    const auto* s = experiment::find_run_setting(key);
    EXPECT_NE(s, nullptr) << key;
    return s != nullptr && s->def != nullptr ? std::string(s->def) : std::string("(none)");
  };
  EXPECT_EQ(def("lock"), w.lock);
  EXPECT_EQ(def("cs_ns"), std::to_string(w.cs_ns));
  EXPECT_EQ(def("cs_lines"), std::to_string(w.cs_lines));
  EXPECT_EQ(def("delay_ns"), std::to_string(w.delay_ns));
  EXPECT_EQ(def("duration_s"), fmt::format("{}", w.duration_s));
  EXPECT_EQ(def("layout"), w.layout);
  EXPECT_EQ(def("long_hold_ns"), std::to_string(w.long_hold_ns));
  EXPECT_EQ(def("wait_halt_delay_ns"), std::to_string(w.wait_halt_delay_ns));
  for (const RunSetting& s : run_settings())
    if (s.limit != nullptr && s.def != nullptr && s.type == SettingType::kUnsigned) {
      EXPECT_EQ(s.def, std::to_string(s.limit->def)) << s.key;
    }
  EXPECT_EQ(def("vcpus"), std::to_string(m.vcpus));
  EXPECT_EQ(def("memory_mib"), std::to_string(m.memory_mib));
  EXPECT_EQ(def("seed"), std::to_string(m.seed));
  EXPECT_EQ(def("guest_ring"), std::to_string(m.guest_ring));
  EXPECT_EQ(def("pv_wake"), abi::pv_wake_name(m.pv_wake));
  for (const abi::PvWake w : abi::kPvWakes)  // the row's choices are exactly the mechanisms
    EXPECT_NE(std::string(experiment::find_run_setting("pv_wake")->choices).find(abi::pv_wake_name(w)), std::string::npos);
  EXPECT_EQ(def("kick_delay_us"), std::to_string(m.backend.kick_delay_us));
  EXPECT_EQ(def("timeout_s"), fmt::format("{}", m.timeout_s));
  EXPECT_EQ(def("pin"), m.pin == machine::PinPolicy::kFloat ? "float" : "spread");
  EXPECT_EQ(def("kick"), pvlock::kick_mode_name(m.backend.mode));
  EXPECT_EQ(def("backend"), pvlock::backend_kind_name(m.backend_kind));
  EXPECT_EQ(def("ple"), m.ple == machine::PleMode::kOff ? "off" : "on");
  EXPECT_EQ(def("runstate"), m.runstate == machine::RunStateMode::kOn    ? "on"
                             : m.runstate == machine::RunStateMode::kOff ? "off"
                                                                         : "auto");
  EXPECT_EQ(def("sbi_kick"), m.sbi_kick_proposed ? "proposed" : "sticky");
  EXPECT_EQ(def("enforce_pv_cpuid"), m.backend.enforce_pv_feature_cpuid ? "on" : "off");
  EXPECT_EQ(def("kick_yield"), m.backend.kick_yield ? "on" : "off");
  EXPECT_EQ(def("kick_boost"), m.backend.kick_boost ? "on" : "off");
  EXPECT_EQ(pvlock::format_halt_poll(m.backend.halt_poll), pvlock::format_halt_poll(pvlock::BackendOptions{}.halt_poll));
}

// What `run` gives the guest with no option is the ABI's production default.
TEST(RunSettings, RunDefaultsAreTheAbiDefaults) {
  for (const auto& [name, kind] : {std::pair{"lockbench", abi::WorkloadKind::kLockbench},
                                   std::pair{"uncontended", abi::WorkloadKind::kUncontended},
                                   std::pair{"torture", abi::WorkloadKind::kTorture}}) {
    experiment::WorkloadSettings w;
    w.workload = name;
    const auto p = experiment::workload_params(w, 1, 1);
    const auto d = abi::default_workload_params(kind);
    for (const abi::WorkloadLimit* l : abi::kWorkloadLimits) EXPECT_EQ(p.*(l->field), d.*(l->field)) << name << " " << l->name;
    EXPECT_EQ(p.kind, d.kind);
    EXPECT_EQ(p.layout, d.layout);
    EXPECT_EQ(abi::out_of_range(p), nullptr) << name;
  }
}

TEST(RunSettings, OutOfRangeNamesTheField) {
  auto p = abi::default_workload_params(abi::WorkloadKind::kLockbench);
  p.cs_ns = abi::kCsNs.max + 1;
  ASSERT_NE(abi::out_of_range(p), nullptr);
  EXPECT_STREQ(abi::out_of_range(p)->name, "cs_ns");
  p = abi::default_workload_params(abi::WorkloadKind::kLockbench);
  p.nlocks = 17;  // counts for torture only
  EXPECT_EQ(abi::out_of_range(p), nullptr);
  p.kind = abi::WorkloadKind::kTorture;
  EXPECT_EQ(abi::out_of_range(p), &abi::kLocks);
  p = abi::default_workload_params(abi::WorkloadKind::kLockbench);
  p.duration_ns = 0;  // a fixed-work run ignores it
  EXPECT_EQ(abi::out_of_range(p), &abi::kDurationNs);
  p.iterations = 10;
  EXPECT_EQ(abi::out_of_range(p), nullptr);
}

TEST(RunSettings, LabSettingsAreTheRowsWithALabSummary) {
  std::vector<std::string> expected;
  for (const RunSetting& s : run_settings())
    if (s.lab != nullptr) expected.push_back(s.key);
  std::vector<std::string> lab;
  for (const auto& s : lab::settings()) {
    lab.push_back(s.name);
    const auto* row = experiment::find_run_setting(s.name);
    ASSERT_NE(row, nullptr);
    EXPECT_STREQ(s.option, row->flag);
    EXPECT_EQ(s.flag, row->type == SettingType::kSwitch);
  }
  EXPECT_EQ(lab, expected);
  EXPECT_EQ(lab::run_arguments({{"cs_ns", "50"}, {"vcpus", "4"}, {"no_pv", "true"}}),
            (std::vector<std::string>{"--vcpus", "4", "--cs", "50", "--no-pv"}));
}

TEST(RunSettings, ParamRefusesTheGuestKeysOfOptions) {
  EXPECT_STREQ(experiment::option_for_guest_key("cs"), "--cs");
  EXPECT_STREQ(experiment::option_for_guest_key("duration_ms"), "--duration");
  EXPECT_STREQ(experiment::option_for_guest_key("halt"), "--halt");
  EXPECT_EQ(experiment::option_for_guest_key("pvb_bound_us"), nullptr);
}

TEST(RunSettings, JsonSettingsListEveryRowsKey) {
  const auto json = report::settings_json(machine::MachineConfig{});
  for (const RunSetting& s : run_settings())
    if (s.json != nullptr) {
      EXPECT_TRUE(json.contains(s.json)) << s.key << " -> settings." << s.json;
    }
  // And every machine knob the settings list is some row's (or derived from one).
  const std::set<std::string> derived = {"boost_bound_us", "kick_mode_changes", "vnuma_remote_cost", "vnuma_host_cpus"};
  for (const auto& [key, value] : json.items()) {
    bool found = derived.count(key) > 0;
    for (const RunSetting& s : run_settings()) found = found || (s.json != nullptr && key == s.json);
    EXPECT_TRUE(found) << "settings." << key << " has no row";
  }
}

// A lock parameter is checked on the host against the guest's own rows
// (guest/locks/pvbounded_tuning.h), in the guest's words, before anything
// boots: exit 2 and one line, on a host without KVM too.
TEST(RunSettings, LockParamsAreCheckedBeforeBoot) {
  for (const auto& [param, words] :
       {std::pair{"pvb_bound_us=-5", "pvb_bound_us=-5 is not a valid value (a number in 1..10000000)"},
        std::pair{"pvb_bound_us=0", "pvb_bound_us=0 is out of range 1..10000000"},
        std::pair{"pvb_handoff=sideways", "pvb_handoff=sideways is not a valid value (head, running, or a number in 0..1)"},
        std::pair{"pvb_head_halt=often", "pvb_head_halt=often is not a valid value (spin, kicked, timed, or a number in 0..2)"},
        std::pair{"pvb_boost=2", "pvb_boost=2 is out of range 0..1"},
        std::pair{"q_pending=2", "q_pending=2 is out of range 0..1"},
        std::pair{"pvq_unfair=on", "pvq_unfair=on is not a valid value (a number in 0..1)"}}) {
    for (const std::string where : {"", "--native "}) {
      const auto o = lockvisor("run " + where + "--workload lockbench --lock pvbounded --duration 0.01 --param " + param);
      EXPECT_EQ(o.exit_code, 2) << o.output;
      EXPECT_EQ(o.output, fmt::format("lockvisor: error: --param '{}': {}\n", param, words));
    }
  }
}

// What --param cannot have meant is refused before anything boots: a key
// given twice (the guest takes the first), an empty key, a lock parameter
// that the run's lock does not read or that no lock reads although it has a
// lock parameter's prefix (a typo), and a lock parameter for a workload
// without a lock. A key of no lock's prefix passes to the guest (a note).
TEST(RunSettings, ParamsTheRunWouldIgnoreAreRefused) {
  for (const auto& [args, words] :
       {std::pair{"--lock pvbounded --param pvb_bound_us=10 --param pvb_bound_us=20",
                  "--param 'pvb_bound_us=20': pvb_bound_us is given twice (the guest would take the first)"},
        std::pair{"--lock pvbounded --param =1", "--param '=1': the key is empty"},
        std::pair{"--lock tas --param pvb_bound_us=10",
                  "--param 'pvb_bound_us=10': only pvbounded read pvb_bound_us, and this run's lock is tas"},
        std::pair{"--lock qspinlock --param pvq_unfair=1",
                  "--param 'pvq_unfair=1': only pvqspinlock, pvconfer, auto read pvq_unfair, and this run's lock is "
                  "qspinlock"}}) {
    for (const std::string where : {"", "--native "}) {
      const auto o = lockvisor("run " + where + "--workload lockbench --duration 0.01 " + args);
      EXPECT_EQ(o.exit_code, 2) << args << ": " << o.output;
      EXPECT_EQ(o.output, fmt::format("lockvisor: error: {}\n", words)) << args;
    }
  }
  const auto typo = lockvisor("run --workload lockbench --lock pvqspinlock --param pvq_unfiar=1");
  EXPECT_EQ(typo.exit_code, 2) << typo.output;
  EXPECT_EQ(typo.output.rfind("lockvisor: error: --param 'pvq_unfiar=1': no lock reads pvq_unfiar (lock parameters: "
                              "pvb_bound_us, ",
                              0),
            0u)
      << typo.output;
  EXPECT_EQ(std::count(typo.output.begin(), typo.output.end(), '\n'), 1) << typo.output;
  const auto no_lock = lockvisor("run --workload pingpong --param q_pending=0");
  EXPECT_EQ(no_lock.output,
            "lockvisor: error: --param 'q_pending=0': a lock parameter, and this run's workload, pingpong, takes no "
            "lock\n");
  const auto note = lockvisor("run --native --workload lockbench --duration 0.01 --param note=first-try");
  EXPECT_EQ(note.exit_code, 0) << note.output;
}

// A setting the run would not read is refused before anything boots, unless
// it is given its default (what the run does anyway): a lock workload's
// setting for a workload without a lock, pingpong's for another workload, a
// VM's for host threads (--native).
TEST(RunSettings, SettingsTheRunWouldIgnoreAreRefused) {
  for (const auto& [args, words] :
       {std::pair{"--workload pingpong --lock nosuchlock",
                  "--lock: a lock workload's setting (lockbench, uncontended, torture), and this run's workload, "
                  "pingpong, takes no lock"},
        std::pair{"--workload hello --cs 500",
                  "--cs: a lock workload's setting (lockbench, uncontended, torture), and this run's workload, hello, "
                  "takes no lock"},
        std::pair{"--workload lockbench --rounds 5", "--rounds: only pingpong reads it, and this run's workload is lockbench"},
        std::pair{"--native --kick lossy", "--kick: a VM's setting; --native runs host threads, no VM"},
        std::pair{"--native --timeout 5", "--timeout: a VM's setting; --native runs host threads, no VM"},
        std::pair{"--native --dedicated", "--dedicated: a VM's setting; --native runs host threads, no VM"},
        std::pair{"--native --image /bin/ls", "--image: a VM's setting; --native runs host threads, no VM"},
        std::pair{"--workload uncontended --inject holder:lock=0,every=1,for=100us",
                  "--inject 'holder:lock=0,every=1,for=100us': targeted schedules need a contended lock workload "
                  "(lockbench, torture; uncontended has no contention to target)"}}) {
    const auto o = lockvisor("run " + std::string(args));
    EXPECT_EQ(o.exit_code, 2) << args << ": " << o.output;
    EXPECT_EQ(o.output, fmt::format("lockvisor: error: {}\n", words)) << args;
  }
  const auto defaults = lockvisor("run --native --workload lockbench --duration 0.01 --kick sticky --vnuma-remote-ns 0");
  EXPECT_EQ(defaults.exit_code, 0) << defaults.output;
}

// A --timeout that cannot outlast a lock workload's --duration would end
// every run as a watchdog timeout (exit 4): refused before it boots.
TEST(RunSettings, ATimeoutWithinTheDurationIsRefused) {
  const auto o = lockvisor("run --workload lockbench --duration 1 --timeout 0.3");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_EQ(o.output,
            "lockvisor: error: --timeout 0.3: not longer than --duration 1: the watchdog would stop every run before "
            "its measured window ends (without --timeout a lock workload gets 70 s)\n");
}

// A bad --vnuma or --vnuma-remote-ns is one line and exit 2 before anything
// boots; --native refuses the guest's modelled remote cost.
TEST(RunSettings, VnumaIsCheckedBeforeBoot) {
  for (const auto& [args, words] :
       {std::pair{"--vcpus 2 --vnuma 3", "--vnuma 3: more nodes than the 2 vCPUs"},
        std::pair{"--vcpus 2 --vnuma 0-1@0,1@1", "--vnuma '0-1@0,1@1': vCPU 1 is in nodes 0 and 1"},
        std::pair{"--vcpus 2 --vnuma 0@0", "--vnuma '0@0': vCPU 1 is in no node"},
        std::pair{"--vcpus 2 --vnuma-remote-ns 100", "--vnuma-remote-ns 100: needs --vnuma (a remote handoff needs two nodes)"},
        std::pair{"--vcpus 2 --vnuma 2 --vnuma-remote-ns 100 --native",
                  "--vnuma-remote-ns 100: the modelled cost is the guest's; --native runs host threads"}}) {
    const auto o = lockvisor(std::string("run --workload lockbench --duration 0.01 ") + args);
    EXPECT_EQ(o.exit_code, 2) << args << ": " << o.output;
    EXPECT_EQ(o.output, fmt::format("lockvisor: error: {}\n", words)) << args;
  }
  // A node's host CPU that does not exist is --vnuma's, not a --pcpus nobody gave.
  const auto o = lockvisor("run --workload lockbench --vcpus 4 --vnuma 0-1@0,2-3@1000");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_EQ(o.output.rfind("lockvisor: error: --vnuma: CPU 1000 does not exist (this host has CPUs 0-", 0), 0u)
      << o.output;
}

// --native refuses what only a VM has, before anything runs (the lab's
// points and --vm specs go through the same validation).
TEST(RunSettings, NativeRefusesWhatOnlyAVmHas) {
  for (const std::string extra : {"--api /tmp/lockvisor-settings-api.sock", "--trace /tmp/lockvisor-settings-t.json",
                                  "--start-gate-fd 3"}) {
    const auto o = lockvisor("run --native --workload lockbench --duration 0.01 " + extra);
    EXPECT_EQ(o.exit_code, 2) << extra << ": " << o.output;
    EXPECT_NE(o.output.find("native"), std::string::npos) << o.output;
  }
}

}  // namespace
}  // namespace lockvisor
