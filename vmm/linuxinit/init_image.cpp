#include "vmm/linuxinit/init_image.h"

extern "C" const char lockvisor_linux_init_start[];
extern "C" const char lockvisor_linux_init_end[];

namespace lockvisor::linux_guest {

std::span<const std::byte> embedded_linux_init() {
  return {reinterpret_cast<const std::byte*>(lockvisor_linux_init_start),
          static_cast<std::size_t>(lockvisor_linux_init_end - lockvisor_linux_init_start)};
}

}  // namespace lockvisor::linux_guest
