#include "vmm/util/scratch_dir.h"

#include <cstdlib>
#include <system_error>

#include "vmm/util/error.h"

namespace lockvisor {

ScratchDir::ScratchDir(const std::string& name, const std::string& purpose) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + name + ".XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) fail_host("cannot create a directory for {}: {}", purpose, pattern);
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace lockvisor
