#include "vmm/host/process_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "vmm/util/error.h"
#include "vmm/util/unique_fd.h"

namespace lockvisor::host {
namespace {

std::string read_text(const char* path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::uint64_t field_or_fail(std::string_view text, std::string_view key, const char* path) {
  const auto value = kib_field(text, key);
  if (!value) fail_host("{} has no '{}' line in kB", path, key);
  return *value;
}

}  // namespace

std::optional<std::uint64_t> kib_field(std::string_view text, std::string_view key) {
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ':') continue;
    line.remove_prefix(key.size() + 1);
    line.remove_prefix(std::min(line.find_first_not_of(" \t"), line.size()));
    std::uint64_t value = 0;
    const auto [rest, error] = std::from_chars(line.data(), line.data() + line.size(), value);
    if (error != std::errc() || std::string_view(rest, line.data() + line.size() - rest) != " kB") return std::nullopt;
    return value;
  }
  return std::nullopt;
}

ProcessMemory read_process_memory() {
  constexpr const char* kRollup = "/proc/self/smaps_rollup";
  constexpr const char* kStatus = "/proc/self/status";
  const std::string rollup = read_text(kRollup);
  const std::string status = read_text(kStatus);
  ProcessMemory m;
  m.rss_kib = field_or_fail(rollup, "Rss", kRollup);
  m.pss_kib = field_or_fail(rollup, "Pss", kRollup);
  m.anon_kib = field_or_fail(status, "RssAnon", kStatus);
  m.peak_rss_kib = field_or_fail(status, "VmHWM", kStatus);
  return m;
}

void reset_peak_rss() {
  constexpr const char* kClearRefs = "/proc/self/clear_refs";
  UniqueFd fd(::open(kClearRefs, O_WRONLY | O_CLOEXEC));
  if (!fd.valid() || ::write(fd.get(), "5", 1) != 1)
    fail_host("cannot reset the peak resident size ({}): {}", kClearRefs, std::strerror(errno));
}

std::optional<std::uint64_t> host_free_kib() { return kib_field(read_text("/proc/meminfo"), "MemFree"); }

std::optional<std::string> transparent_hugepages() {
  const std::string modes = read_text("/sys/kernel/mm/transparent_hugepage/enabled");
  const auto open = modes.find('['), close = modes.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  return modes.substr(open + 1, close - open - 1);
}

}  // namespace lockvisor::host
