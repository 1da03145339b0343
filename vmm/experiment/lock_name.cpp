#include "vmm/experiment/lock_name.h"

#include <string>

#include "vmm/util/error.h"

namespace lockvisor::experiment {

const locks::LockInfo& known_lock(std::string_view name) {
  const std::string text(name);
  if (const locks::LockInfo* info = locks::find_lock(text.c_str())) return *info;
  std::string names;
  for (const locks::LockInfo& l : locks::kLocks) names += (names.empty() ? "" : ", ") + std::string(l.name);
  fail("--lock '{}': unknown lock (known: {})", text, names);
}

}  // namespace lockvisor::experiment
