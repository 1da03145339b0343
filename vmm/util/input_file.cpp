#include "vmm/util/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "vmm/util/error.h"
#include "vmm/util/unique_fd.h"

namespace lockvisor {

std::vector<std::uint8_t> read_input_file(const std::string& path, const char* what, std::uint64_t max_bytes) {
  if (path.empty()) fail("{}: no file given", what);
  // O_NONBLOCK: a FIFO or a device must be refused, not waited on.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) fail("{} {}: {}", what, path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail("{} {}: {}", what, path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail("{} {}: is a directory", what, path);
  if (!S_ISREG(st.st_mode)) fail("{} {}: not a regular file", what, path);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size == 0) fail("{} {}: the file is empty", what, path);
  if (size > max_bytes) fail("{} {}: {} bytes, more than the {} MiB allowed", what, path, size, max_bytes >> 20);
  std::vector<std::uint8_t> bytes(size);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("{} {}: {}", what, path, std::strerror(errno));
    if (n == 0) fail("{} {}: shrank while being read ({} of {} bytes)", what, path, done, bytes.size());
    done += static_cast<std::size_t>(n);
  }
  return bytes;
}

}  // namespace lockvisor
