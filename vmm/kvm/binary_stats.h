// Reader of KVM's binary statistics (KVM_GET_STATS_FD): names are read once,
// values re-read with one pread per snapshot.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/util/unique_fd.h"

namespace lockvisor::kvm {

class BinaryStats {
 public:
  BinaryStats() = default;
  // Takes ownership of a stats fd; an invalid fd yields an empty reader.
  explicit BinaryStats(UniqueFd fd);

  bool available() const { return fd_.valid(); }
  // Current values of every single-valued (size 1) counter, by name.
  std::map<std::string, std::uint64_t> snapshot() const;
  // One counter's current value (one 8-byte pread: cheap enough to poll, and
  // safe from any thread while the vCPU runs); nullopt when this kernel has
  // no such single-valued counter or the read fails.
  std::optional<std::uint64_t> value(std::string_view name) const;
  bool has(std::string_view name) const;

 private:
  struct Descriptor {
    std::string name;
    std::uint32_t offset;  // in u64 units from the data section
  };
  UniqueFd fd_;
  std::uint32_t data_offset_ = 0;
  std::uint32_t data_words_ = 0;
  std::vector<Descriptor> descriptors_;
};

}  // namespace lockvisor::kvm
