#include "guest/linux/read_file.h"

#include <cerrno>

#include <fcntl.h>
#include <unistd.h>

#include "guest/linux/unique_fd.h"

namespace lockvisor::linux_init {

std::optional<std::string> read_small_file(const char* path, std::size_t limit) {
  const UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string text;
  char buffer[4096];
  while (text.size() < limit) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  if (text.size() > limit) text.resize(limit);
  return text;
}

}  // namespace lockvisor::linux_init
