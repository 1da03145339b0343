// An output file (--json) that cannot damage anything but itself.
//
// The file appears complete or not at all: the bytes go to a fresh temporary
// next to the target (O_CREAT|O_EXCL|O_NOFOLLOW, random name: a planted file
// or symlink is never opened), which is fsynced and renamed over the target.
// A target that exists and is not a regular file (symlink, directory, FIFO,
// device, socket) is refused, never followed or replaced, so `--json
// /dev/null` run as root cannot replace /dev/null. No temporary survives a
// failure: an RAII guard unlinks it.
//
// Constructing an OutputFile checks the target and proves the directory
// writable (by creating and removing a temporary), so a command can refuse a
// bad path before it boots anything rather than after the run.
#pragma once
#include <string>
#include <string_view>

namespace lockvisor {

class OutputFile {
 public:
  // `option` names the flag in messages ("--json"). Throws lockvisor::Error:
  // usage (exit 2) for a target that is unacceptable or cannot be created.
  OutputFile(std::string path, std::string option);

  // Replaces the target with `bytes`. Throws lockvisor::Error: usage if the
  // target has meanwhile become unacceptable or uncreatable, host (exit 6)
  // if writing failed (no space, I/O error, file size limit).
  void write(std::string_view bytes) const;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string option_;
  std::string directory_;  // where the target and the temporary live
  std::string name_;       // the target's last component
};

}  // namespace lockvisor
