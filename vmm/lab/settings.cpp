#include "vmm/lab/settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "vmm/experiment/run_settings.h"

namespace lockvisor::lab {
namespace {

const std::string kVmPrefix(kVmSettingPrefix);

// The lab's settings are the run settings that have a lab summary, in the
// table's order (vmm/experiment/run_settings.cpp).
const std::vector<Setting>& table() {
  static const std::vector<Setting> kSettings = [] {
    std::vector<Setting> rows;
    for (const auto& r : experiment::run_settings())
      if (r.lab != nullptr)
        rows.push_back({r.key, r.flag, r.type == experiment::SettingType::kSwitch, r.repeatable, r.lab});
    return rows;
  }();
  return kSettings;
}

}  // namespace

std::span<const Setting> settings() { return table(); }

const Setting* find_setting(const std::string& name) {
  for (const auto& s : table())
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
  for (const auto& s : table()) {
    const std::string* value = lookup(values, s.name);
    if (value == nullptr) continue;
    if (s.flag) {
      if (*value == "true") args.emplace_back(s.option);
    } else if (s.several) {
      // Words separated by spaces: a --param value holds no space (the run
      // refuses one), an --inject value separates its specs with ';'.
      std::size_t at = value->find_first_not_of(' ');
      while (at != std::string::npos) {
        const std::size_t end = value->find(' ', at);
        args.emplace_back(s.option);
        args.push_back(value->substr(at, end == std::string::npos ? std::string::npos : end - at));
        at = value->find_first_not_of(' ', end == std::string::npos ? value->size() : end);
      }
    } else {
      args.emplace_back(s.option);
      args.push_back(*value);
    }
  }
  // Multi-VM points: "vm:LABEL:NAME" settings (scenario.h), one --vm per
  // label in the order the labels first appear, keys in table order
  // (`run --vm` keys are the option names without the dashes).
  std::vector<std::string> labels;
  for (const auto& [name, value] : values) {
    if (name.rfind(kVmPrefix, 0) != 0) continue;
    const auto label = name.substr(kVmPrefix.size(), name.find(':', kVmPrefix.size()) - kVmPrefix.size());
    if (std::find(labels.begin(), labels.end(), label) == labels.end()) labels.push_back(label);
  }
  for (const auto& label : labels) {
    std::string spec = "label=" + label;
    for (const auto& s : table())
      if (const std::string* value = lookup(values, kVmPrefix + label + ":" + s.name))
        spec += fmt::format(",{}={}", std::string_view(s.option).substr(2), *value);
    args.emplace_back("--vm");
    args.push_back(spec);
  }
  return args;
}

}  // namespace lockvisor::lab
