// Every setting of a `lockvisor run`, one row each: its name in scenario
// files and --vm specs, its command-line flag, its type and range, its
// default, its help text, and where its value goes (the guest's workload
// record, the MachineConfig, or the run command itself).
//
// What is made from these rows:
//   * the options of `lockvisor run` (vmm/cli/setting_options.h registers a
//     row on its variable, for run_options.cpp and machine_options.cpp:
//     flag, help, range check and the default --help shows come from here);
//   * the lab's settings (vmm/lab/settings.cpp: the rows with a lab summary,
//     in this order, are the scenario keys and axes);
//   * the guest argument keys that --param may not set (guest_key);
//   * the checks of a test (tests/cli/run_settings_test.cpp) that every
//     `run` option is a row, that each row's default is its variable's
//     initial value, and that the JSON report's `settings` has each row's
//     `json` key.
// The ranges of the workload-record fields are abi::WorkloadLimit rows
// (lockvisor/abi/workload_limits.h), which the guest checks too.
//
// ADDING A RUN OPTION = one row here + the code that uses its value (and
// the add_setting line that binds it to that variable).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "lockvisor/abi/workload_limits.h"

namespace lockvisor::experiment {

enum class SettingType {
  kUnsigned,  // an unsigned integer in [min, max] (decimal or 0x-hex)
  kSeconds,   // a finite number of seconds in [min_s, max_s], or 0 when zero_allowed
  kChoice,    // one of `choices` ('|'-separated)
  kSwitch,    // a flag without a value
  kText,      // free text (a file, a list, a spec): checked by the code that uses it
};

enum class SettingTarget {
  kWorkload,  // abi::WorkloadParams, the guest's record in BootInfo::workload (also --native's)
  kMachine,   // machine::MachineConfig
  kRun,       // the run command itself (what runs, outputs, several VMs)
};

// What a --vm SPEC of a multi-VM run may do with the setting.
enum class VmScope {
  kPerVm,    // a key of --vm specs; given outside them, every VM gets it
  kOwnPath,  // a file or socket: per --vm only, and no two VMs share one
  kNotPerVm, // the multi-VM run's own (or no VM's business): not a --vm key
};

struct RunSetting {
  const char* key;    // scenario and --vm key: cs_ns, kick_delay_us, ...
  const char* flag;   // of `lockvisor run`: --cs, --kick-delay-us, ... (short aliases: cli_names)
  SettingType type;
  SettingTarget target;
  std::uint64_t min = 0, max = 0;      // kUnsigned
  double min_s = 0, max_s = 0;         // kSeconds
  bool zero_allowed = false;           // kSeconds: 0 has a meaning of its own
  const char* choices = nullptr;       // kChoice
  const char* def = nullptr;           // the default as --help shows it; nullptr: none shown
  const char* help = "";               // `run --help`
  const char* lab = nullptr;           // the lab's one-line summary; nullptr: not a lab setting
  const char* guest_key = nullptr;     // the guest's argument key it sets (--param may not)
  const char* json = nullptr;          // its key in the JSON report's `settings`, if listed there
  bool repeatable = false;
  const char* cli_names = nullptr;     // CLI11 names when there is a short alias ("-l,--lock")
  const abi::WorkloadLimit* limit = nullptr;  // kWorkload: the record field's row (range, default)
  VmScope vm = VmScope::kPerVm;
  // Which runs read the setting; `run` refuses it given to any other, since a
  // setting silently ignored is an experiment that did not run as written.
  // `workloads`: the freestanding workloads that read it ('|'-separated);
  // nullptr: every one, except that a kWorkload row (the lock workload's
  // record) is read by the lock workloads only. `guest_only`: a VM's setting,
  // which host threads (--native) have no use for.
  const char* workloads = nullptr;
  bool guest_only = false;
};

std::span<const RunSetting> run_settings();
const RunSetting* find_run_setting(std::string_view key);
const RunSetting* find_run_setting_by_flag(std::string_view flag);
const RunSetting* find_run_setting_by_limit(const abi::WorkloadLimit& limit);

// The option of a guest argument key (`cs` -> `--cs`), or nullptr: --param
// refuses the keys that have one (the guest takes a key's first value, so a
// --param would silently override the option while the report showed the
// option's value).
const char* option_for_guest_key(std::string_view key);

// Why a setting given to this run as `value` would be ignored by it, or ""
// when the run reads it or the value is the setting's default (what the run
// does anyway: a lab axis may give `vnuma_remote_ns = 0` to every point):
// `workload` is a freestanding guest workload, `native` a run on host
// threads. The words name the setting's flag.
std::string ignored_by(const RunSetting& s, const std::string& value, const std::string& workload, bool native);

// The range as --help shows it after the type: "0..1000000000", "1..16",
// "0.001..3600 s"; empty for a type without one.
std::string range_text(const RunSetting& s);

}  // namespace lockvisor::experiment
