#include "vmm/util/file_identity.h"

#include <sys/stat.h>

#include <filesystem>
#include <system_error>

#include "vmm/util/error.h"

namespace lockvisor {

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  std::error_code ea, eb;
  const auto pa = std::filesystem::weakly_canonical(std::filesystem::absolute(a, ea), ea);
  const auto pb = std::filesystem::weakly_canonical(std::filesystem::absolute(b, eb), eb);
  return !ea && !eb && pa == pb;
}

void refuse_shared_files(const std::vector<std::pair<std::string, std::string>>& paths) {
  for (std::size_t i = 0; i < paths.size(); ++i)
    for (std::size_t j = i + 1; j < paths.size(); ++j)
      if (!paths[i].second.empty() && !paths[j].second.empty() && same_file(paths[i].second, paths[j].second))
        fail("{} {}: the same file as {} {}; give each its own", paths[j].first, paths[j].second, paths[i].first,
             paths[i].second);
}

}  // namespace lockvisor
