// Reading a file a user names on the command line (a kernel, an initrd):
// only a regular file, never more than a stated bound, and every failure a
// one-line usage error that names the option and the file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lockvisor {

// `what` names the option in messages ("--kernel"). Refuses a missing or
// unreadable path, a directory, FIFO or device, an empty file and one
// larger than `max_bytes`, before reading it.
std::vector<std::uint8_t> read_input_file(const std::string& path, const char* what, std::uint64_t max_bytes);

}  // namespace lockvisor
