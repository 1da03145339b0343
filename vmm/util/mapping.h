// Owning mmap()ed region: unmapped exactly once, movable, never copied.
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <span>
#include <utility>

namespace lockvisor {

class Mapping {
 public:
  Mapping() = default;
  Mapping(void* addr, std::size_t size) : addr_(addr), size_(size) {}
  Mapping(Mapping&& other) noexcept
      : addr_(std::exchange(other.addr_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  Mapping& operator=(Mapping&& other) noexcept {
    if (this != &other) {
      release();
      addr_ = std::exchange(other.addr_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { release(); }

  void* data() const { return addr_; }
  std::size_t size() const { return size_; }
  std::span<std::byte> bytes() const { return {static_cast<std::byte*>(addr_), size_}; }

 private:
  void release() {
    if (addr_ != nullptr) ::munmap(addr_, size_);
    addr_ = nullptr;
    size_ = 0;
  }
  void* addr_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace lockvisor
