// A private directory under $TMPDIR (or /tmp) for a command's child runs:
// their reports and logs, removed with everything in it at the end.
#pragma once
#include <filesystem>
#include <string>

namespace lockvisor {

class ScratchDir {
 public:
  // `name` starts the directory's name ("lockvisor-vms"); `purpose` ends the
  // host error if it cannot be made ("cannot create a directory for ...").
  ScratchDir(const std::string& name, const std::string& purpose);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace lockvisor
