#include "vmm/lab/presets.h"

namespace lockvisor::lab {

// Generated from vmm/lab/presets/*.toml (vmm/lab/embed_presets.cmake).
extern const Preset kPresets[];
extern const std::size_t kPresetCount;

std::span<const Preset> presets() { return {kPresets, kPresetCount}; }

const Preset* find_preset(const std::string& name) {
  for (const auto& p : presets())
    if (name == p.name) return &p;
  return nullptr;
}

}  // namespace lockvisor::lab
