// The guest's RAM: one anonymous mapping, guest-physical address 0 upward.
// Every access on behalf of the guest goes through a bounds-checked view,
// because any address a guest hands the VMM is untrusted.
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
