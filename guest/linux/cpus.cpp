#include "guest/linux/cpus.h"

#include <charconv>

#include <unistd.h>

#include "guest/linux/read_file.h"

namespace lockvisor::linux_init {
namespace {

std::optional<unsigned> parse_cpu_number(std::string_view text) {
  unsigned value = 0;
  if (text.empty()) return std::nullopt;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value > 65535) return std::nullopt;
  return value;
}

}  // namespace

std::optional<unsigned> count_cpu_list(std::string_view list) {
  unsigned count = 0;
  if (list.empty()) return std::nullopt;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view range = list.substr(0, comma);
    list.remove_prefix(comma == std::string_view::npos ? list.size() : comma + 1);
    if (comma != std::string_view::npos && list.empty()) return std::nullopt;  // "0-3,"
    const std::size_t dash = range.find('-');
    const auto first = parse_cpu_number(range.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first : parse_cpu_number(range.substr(dash + 1));
    if (!first || !last || *last < *first) return std::nullopt;
    count += *last - *first + 1;
  }
  return count;
}

OnlineCpus online_cpus() {
  OnlineCpus cpus;
  cpus.sysconf = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (auto read = read_small_file("/sys/devices/system/cpu/online", 200)) {
    std::string text = std::move(*read);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    cpus.sysfs = count_cpu_list(text);
    cpus.sysfs_list = text;
  }
  return cpus;
}

}  // namespace lockvisor::linux_init
