// A `lockvisor run` option made from its row in the run-settings table
// (vmm/experiment/run_settings.h): flag, help, range check, choices and the
// default --help shows all come from the row; the caller only says which
// variable the value goes to.
#pragma once
#include <CLI/CLI.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "vmm/cli/option_checks.h"
#include "vmm/experiment/run_settings.h"

namespace lockvisor::cli {

// The row of `key`; a key without one is a programming error.
inline const experiment::RunSetting& setting_row(std::string_view key) {
  const auto* row = experiment::find_run_setting(key);
  if (row == nullptr) throw std::logic_error("no run setting '" + std::string(key) + "'");
  return *row;
}

inline std::vector<std::string> setting_choices(const experiment::RunSetting& row) {
  std::vector<std::string> choices;
  std::string_view rest = row.choices;
  while (!rest.empty()) {
    const auto bar = rest.find('|');
    choices.emplace_back(rest.substr(0, bar));
    rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
  }
  return choices;
}

// The row's range check and choices on an option.
inline CLI::Option* apply_setting_checks(CLI::Option* option, const experiment::RunSetting& row) {
  using experiment::SettingType;
  switch (row.type) {
    case SettingType::kUnsigned: option->transform(unsigned_in(row.min, row.max)); break;
    case SettingType::kSeconds: option->check(seconds_in(row.min_s, row.max_s, row.zero_allowed)); break;
    case SettingType::kChoice: option->check(CLI::IsMember(setting_choices(row))); break;
    case SettingType::kSwitch:
    case SettingType::kText: break;
  }
  if (row.def != nullptr) option->default_str(row.def);
  return option;
}

// Registers the row of `key` on `command`, bound to `variable`. A string
// variable starts at the row's default (the one place it is written); any
// other variable's initial value is checked against the row's default by
// the run-settings test.
template <class V>
CLI::Option* add_setting(CLI::App& command, std::string_view key, V& variable, const std::string& help_suffix = {}) {
  const auto& row = setting_row(key);
  const std::string names = row.cli_names != nullptr ? row.cli_names : row.flag;
  const std::string help = row.help + help_suffix;
  if (row.type == experiment::SettingType::kSwitch) {
    if constexpr (std::is_same_v<V, bool>) return command.add_flag(names, variable, help);
    throw std::logic_error("switch setting '" + std::string(key) + "' needs a bool");
  }
  if constexpr (std::is_same_v<V, std::string>)
    if (row.def != nullptr) variable = row.def;
  return apply_setting_checks(command.add_option(names, variable, help), row);
}

// The same for an option whose value goes through `store` (an optional, a
// value that means "the default" when unset).
template <class V, class F>
CLI::Option* add_setting_function(CLI::App& command, std::string_view key, F store,
                                  const std::string& help_suffix = {}) {
  const auto& row = setting_row(key);
  return apply_setting_checks(
      command.add_option_function<V>(row.cli_names ? row.cli_names : row.flag, store, row.help + help_suffix), row);
}

}  // namespace lockvisor::cli
