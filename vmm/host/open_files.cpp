#include "vmm/host/open_files.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "vmm/util/error.h"

namespace lockvisor::host {

std::uint64_t open_file_count() {
  std::error_code error;
  std::uint64_t count = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", error), end; !error && it != end; it.increment(error))
    ++count;
  if (error) fail_host("cannot count this process's open files (/proc/self/fd): {}", error.message());
  return count;  // the iterator's own descriptor included: one to spare
}

void make_room_for_files(std::uint64_t more, std::string_view what) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) fail_host("getrlimit(RLIMIT_NOFILE): {}", std::strerror(errno));
  const std::uint64_t needed = open_file_count() + more;
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= needed) return;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed)
    fail_host("{}: needs {} open files, and this process may open at most {} (the hard limit: raise `ulimit -Hn`)",
              what, needed, limit.rlim_max);
  limit.rlim_cur = needed;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0)
    fail_host("{}: cannot raise the open-file limit to {}: {}", what, needed, std::strerror(errno));
}

}  // namespace lockvisor::host
