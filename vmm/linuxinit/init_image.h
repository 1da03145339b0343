// lockvisor's /init for Linux guests (guest/linux/), built with the project
// and embedded in the lockvisor binary (init_image_blob.S), as the
// freestanding guest image is (vmm/guest_image.h): `lockvisor run --kernel`
// needs no file next to it.
#pragma once
#include <cstddef>
#include <span>

namespace lockvisor::linux_guest {

// The static, stripped executable, byte for byte.
std::span<const std::byte> embedded_linux_init();

}  // namespace lockvisor::linux_guest
