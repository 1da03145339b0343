#include "vmm/guest_image.h"

#include "vmm/loader/elf_loader.h"

extern "C" const char lockvisor_guest_image_start[];
extern "C" const char lockvisor_guest_image_end[];

namespace lockvisor {

std::span<const std::byte> embedded_guest_image() {
  return {reinterpret_cast<const std::byte*>(lockvisor_guest_image_start),
          static_cast<std::size_t>(lockvisor_guest_image_end - lockvisor_guest_image_start)};
}

std::span<const std::byte> select_guest_image(const std::string& path, std::vector<std::byte>& storage) {
  if (path.empty()) return embedded_guest_image();
  storage = vmm::read_image_file(path);
  return storage;
}

}  // namespace lockvisor
