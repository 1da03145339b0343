#include "vmm/kvm/guest_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "vmm/util/error.h"

namespace lockvisor::kvm {

GuestMemory::GuestMemory(std::uint64_t bytes) {
  void* addr = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (addr == MAP_FAILED) fail_host("cannot allocate {} MiB of guest memory: {}", bytes >> 20, std::strerror(errno));
  mapping_ = Mapping(addr, bytes);
}

bool GuestMemory::map_file(std::uint64_t gpa, std::uint64_t length, int fd, std::uint64_t offset) {
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  if (length == 0 || gpa % page != 0 || length % page != 0 || offset % page != 0 || !range(gpa, length)) return false;
  void* at = host_base() + gpa;
  if (::mmap(at, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, static_cast<off_t>(offset)) == at)
    return true;
  // A failed MAP_FIXED may already have unmapped the range: put fresh RAM
  // back, as the constructor made it.
  const int err = errno;
  if (::mmap(at, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) != at)
    fail_host("guest memory: cannot restore [{:#x}, {:#x}) after a failed file mapping ({}): {}", gpa, gpa + length,
              std::strerror(err), std::strerror(errno));
  return false;
}

std::optional<std::span<std::byte>> GuestMemory::range(std::uint64_t gpa, std::uint64_t length) const {
  std::uint64_t end = 0;
  if (__builtin_add_overflow(gpa, length, &end) || end > size()) return std::nullopt;
  return std::span<std::byte>(host_base() + gpa, length);
}

}  // namespace lockvisor::kvm
