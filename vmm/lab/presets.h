// The named scenarios (`lockvisor lab --preset NAME`): TOML files in
// vmm/lab/presets/, embedded into the binary at build time (CMake writes
// them into a generated source; see vmm/CMakeLists.txt). Presets are data:
// adding one is adding a .toml file there.
#pragma once
#include <span>
#include <string>

namespace lockvisor::lab {

struct Preset {
  const char* name;  // the file name without .toml
  const char* text;
};

std::span<const Preset> presets();  // sorted by name
const Preset* find_preset(const std::string& name);

}  // namespace lockvisor::lab
