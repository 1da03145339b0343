// The guest's RAM: one private mapping, guest-physical address 0 upward,
// anonymous except where map_file() put a file's pages. Every access on
// behalf of the guest goes through a bounds-checked view, because any
// address a guest hands the VMM is untrusted.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>

#include "vmm/util/mapping.h"

namespace lockvisor::kvm {

class GuestMemory {
 public:
  explicit GuestMemory(std::uint64_t bytes);

  std::uint64_t size() const { return mapping_.size(); }
  std::byte* host_base() const { return static_cast<std::byte*>(mapping_.data()); }
  std::span<std::byte> all() const { return mapping_.bytes(); }

  // Replaces the RAM at [gpa, gpa + length) with a private, copy-on-write
  // mapping of `fd` at `offset` (page-aligned, all three), so the guest
  // reads the file's pages where a copy would have faulted in fresh ones,
  // and its writes stay its own. False, with the range still zero-filled
  // RAM, when the kernel refuses (the caller then copies); throws only if
  // the RAM cannot even be put back.
  bool map_file(std::uint64_t gpa, std::uint64_t length, int fd, std::uint64_t offset);

  // The host view of [gpa, gpa + length), or nullopt if any byte lies outside
  // guest memory (overflow-safe).
  std::optional<std::span<std::byte>> range(std::uint64_t gpa, std::uint64_t length) const;

  // Copies a trivially copyable T out of guest memory; nullopt if out of bounds.
  template <typename T>
  std::optional<T> read(std::uint64_t gpa) const {
    auto bytes = range(gpa, sizeof(T));
    if (!bytes) return std::nullopt;
    T value;
    std::memcpy(&value, bytes->data(), sizeof(T));
    return value;
  }

  // Host pointer for VMM-owned structures at fixed, validated addresses.
  // Throws if [gpa, gpa + sizeof(T)) is outside guest memory.
  template <typename T>
  T* at(std::uint64_t gpa) const {
    auto bytes = range(gpa, sizeof(T));
    if (!bytes) throw std::out_of_range("guest memory: VMM structure outside RAM");
    return reinterpret_cast<T*>(bytes->data());
  }

 private:
  Mapping mapping_;
};

}  // namespace lockvisor::kvm
