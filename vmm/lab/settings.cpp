#include "vmm/lab/settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace lockvisor::lab {
namespace {

const std::string kVmPrefix(kVmSettingPrefix);

// clang-format off
constexpr Setting kSettings[] = {
  {"workload",        "--workload",        false, "lockbench, uncontended or torture"},
  {"lock",            "--lock",            false, "lock algorithm (lockvisor locks)"},
  {"vcpus",           "--vcpus",           false, "vCPUs (or host threads with native)"},
  {"pcpus",           "--pcpus",           false, "host-CPU set, e.g. 0 or 0-1"},
  {"pin",             "--pin",             false, "spread or float"},
  {"cs_ns",           "--cs",              false, "critical section, ns"},
  {"cs_lines",        "--cs-lines",        false, "cache lines written in the critical section"},
  {"delay_ns",        "--delay",           false, "work outside the critical section, ns"},
  {"duration_s",      "--duration",        false, "measured window, s"},
  {"iterations",      "--iterations",      false, "acquisitions per CPU instead of a duration"},
  {"layout",          "--layout",          false, "standalone or embedded"},
  {"locks",           "--locks",           false, "torture: number of locks"},
  {"long_hold_ns",    "--long-hold-ns",    false, "torture: long-hold length, ns"},
  {"long_hold_every", "--long-hold-every", false, "torture: one long hold per N acquisitions (0: none)"},
  {"kick",            "--kick",            false, "sticky or lossy"},
  {"kick_delay_us",   "--kick-delay-us",   false, "delay every kick, us"},
  {"halt_poll_us",    "--halt-poll-us",    false, "poll before sleeping in a halt, us (= halt_poll fixed:N)"},
  {"halt_poll",       "--halt-poll",       false, "off, fixed:US or adaptive[:MAX_US]"},
  {"kick_yield",      "--kick-yield",      false, "on or off: the kicker yields to a woken vCPU on its CPU"},
  {"kick_boost",      "--kick-boost",      false, "on or off: a kick boosts the woken vCPU"},
  {"boost",           "--boost",           false, "auto, fifo, nice or off: how YIELD_TO and kick boosts work"},
  {"no_steal_time",   "--no-steal-time",   true,  "hide KVM_FEATURE_STEAL_TIME"},
  {"backend",         "--backend",         false, "userspace or kvm"},
  {"guest_ring",      "--guest-ring",      false, "3 or 0: where the workload runs"},
  {"ple",             "--ple",             false, "on or off: pause-loop exiting"},
  {"runstate",        "--runstate",        false, "auto, on or off"},
  {"no_pv",           "--no-pv",           true,  "hide KVM_FEATURE_PV_UNHALT"},
  {"dedicated",       "--dedicated",       true,  "advertise KVM_HINTS_REALTIME"},
  {"memory_mib",      "--memory",          false, "guest memory, MiB"},
  {"seed",            "--seed",            false, "seed of the workload's random choices"},
  {"inject",          "--inject",          false, "preemption injection, ';'-separated specs (docs/preemption.md)"},
  {"param",           "--param",           false, "extra workload parameter key=value (e.g. pvb_bound_us=1000)"},
  {"timeout_s",       "--timeout",         false, "watchdog, s"},
  {"hogs",            "--hogs",            false, "host CPU hogs: N busy threads over pcpus for the run"},
  {"native",          "--native",          true,  "run on host threads, no VM"},
};
// clang-format on

}  // namespace

std::span<const Setting> settings() { return kSettings; }

const Setting* find_setting(const std::string& name) {
  for (const auto& s : kSettings)
    if (name == s.name) return &s;
  return nullptr;
}

void assign(SettingValues& values, const std::string& name, const std::string& value) {
  for (auto& [n, v] : values)
    if (n == name) {
      v = value;
      return;
    }
  values.emplace_back(name, value);
}

const std::string* lookup(const SettingValues& values, const std::string& name) {
  for (const auto& [n, v] : values)
    if (n == name) return &v;
  return nullptr;
}

std::vector<std::string> run_arguments(const SettingValues& values) {
  std::vector<std::string> args;
  for (const auto& s : kSettings) {
    const std::string* value = lookup(values, s.name);
    if (value == nullptr) continue;
    if (s.flag) {
      if (*value == "true") args.emplace_back(s.option);
    } else {
      args.emplace_back(s.option);
      args.push_back(*value);
    }
  }
  // Multi-VM points: "vm:LABEL:NAME" settings (scenario.h), one --vm per
  // label in the order the labels first appear, keys in kSettings order
  // (`run --vm` keys are the option names without the dashes).
  std::vector<std::string> labels;
  for (const auto& [name, value] : values) {
    if (name.rfind(kVmPrefix, 0) != 0) continue;
    const auto label = name.substr(kVmPrefix.size(), name.find(':', kVmPrefix.size()) - kVmPrefix.size());
    if (std::find(labels.begin(), labels.end(), label) == labels.end()) labels.push_back(label);
  }
  for (const auto& label : labels) {
    std::string spec = "label=" + label;
    for (const auto& s : kSettings)
      if (const std::string* value = lookup(values, kVmPrefix + label + ":" + s.name))
        spec += fmt::format(",{}={}", std::string_view(s.option).substr(2), *value);
    args.emplace_back("--vm");
    args.push_back(spec);
  }
  return args;
}

}  // namespace lockvisor::lab
