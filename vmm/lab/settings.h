// What a lab point can set: each setting is one `lockvisor run` option.
// A scenario's [fixed] table and its axes name settings by these names; a
// point becomes a child `lockvisor run` command line by this table.
//
// They are the rows of the run-settings table (vmm/experiment/run_settings.h)
// that have a lab summary: ADDING A KNOB AS A LAB AXIS = giving its row one.
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockvisor::lab {

struct Setting {
  const char* name;    // in scenario files: vcpus, kick_delay_us, ...
  const char* option;  // of `lockvisor run`: --vcpus, --kick-delay-us, ...
  bool flag;           // true: a switch (value true/false), else the option takes the value
  bool several;        // a repeatable option (--param): a value of several words is one option per word
  const char* help;
};

std::span<const Setting> settings();
const Setting* find_setting(const std::string& name);

// Per-VM settings of a multi-VM point are "vm:LABEL:NAME" (scenario.h, VmSpec).
inline constexpr std::string_view kVmSettingPrefix = "vm:";

// name -> value, in the order given (a later entry for the same name wins).
using SettingValues = std::vector<std::pair<std::string, std::string>>;

// Sets `name` to `value`, replacing an earlier value.
void assign(SettingValues& values, const std::string& name, const std::string& value);
// The value of `name`, or nullptr.
const std::string* lookup(const SettingValues& values, const std::string& name);

// `lockvisor run` arguments for these settings (without "run" and --json),
// in table order, so that equal settings give equal command lines.
std::vector<std::string> run_arguments(const SettingValues& values);

}  // namespace lockvisor::lab
