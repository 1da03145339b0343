// Reads a small file (/proc/cmdline, a sysfs attribute) whole, with plain
// read(2): iostreams would pull the locale machinery, about a megabyte,
// into a static program.
#pragma once
#include <cstddef>
#include <optional>
#include <string>

namespace lockvisor::linux_init {

// At most `limit` bytes of the file; std::nullopt when it cannot be opened
// or read.
std::optional<std::string> read_small_file(const char* path, std::size_t limit = 64 * 1024);

}  // namespace lockvisor::linux_init
