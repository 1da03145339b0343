#include "vmm/kvm/guest_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "vmm/util/error.h"

namespace lockvisor::kvm {

GuestMemory::GuestMemory(std::uint64_t bytes) {
  void* addr = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (addr == MAP_FAILED) fail_host("cannot allocate {} MiB of guest memory: {}", bytes >> 20, std::strerror(errno));
  mapping_ = Mapping(addr, bytes);
}

std::optional<std::span<std::byte>> GuestMemory::range(std::uint64_t gpa, std::uint64_t length) const {
  std::uint64_t end = 0;
  if (__builtin_add_overflow(gpa, length, &end) || end > size()) return std::nullopt;
  return std::span<std::byte>(host_base() + gpa, length);
}

}  // namespace lockvisor::kvm
