#include "vmm/host/kvm_module_params.h"

#include <fstream>

namespace lockvisor::host {
namespace {

std::optional<std::int64_t> read_param(const std::filesystem::path& sys_module, const char* module, const char* name) {
  std::ifstream in(sys_module / module / "parameters" / name);
  std::int64_t value = 0;
  if (!(in >> value)) return std::nullopt;
  return value;
}

}  // namespace

PauseExitParams read_pause_exit_params(const std::filesystem::path& sys_module) {
  struct Module {
    const char* name;
    const char* params[2];
  };
  // PLE (Intel) and the pause filter (AMD); the module that is loaded wins.
  static constexpr Module kModules[] = {{"kvm_intel", {"ple_gap", "ple_window"}},
                                        {"kvm_amd", {"pause_filter_count", "pause_filter_thresh"}}};
  PauseExitParams result;
  for (const auto& module : kModules) {
    std::error_code ec;
    if (!std::filesystem::is_directory(sys_module / module.name / "parameters", ec)) continue;
    result.module = module.name;
    for (const char* param : module.params)
      if (const auto value = read_param(sys_module, module.name, param)) result.values[param] = *value;
    break;
  }
  return result;
}

std::optional<std::int64_t> read_halt_poll_ns(const std::filesystem::path& sys_module) {
  return read_param(sys_module, "kvm", "halt_poll_ns");
}

}  // namespace lockvisor::host
