// The guest image built with the project, embedded in the lockvisor binary,
// so `lockvisor run` needs no file next to it. --image overrides it.
#pragma once
#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace lockvisor {

std::span<const std::byte> embedded_guest_image();

// The embedded image, or the file at `path` when it is not empty (kept in
// `storage`). Throws lockvisor::Error for an unreadable file.
std::span<const std::byte> select_guest_image(const std::string& path, std::vector<std::byte>& storage);

}  // namespace lockvisor
