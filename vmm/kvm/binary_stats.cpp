#include "vmm/kvm/binary_stats.h"

#include <linux/kvm.h>

#include "vmm/kvm/uapi_layout.h"
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace lockvisor::kvm {

BinaryStats::BinaryStats(UniqueFd fd) : fd_(std::move(fd)) {
  if (!fd_.valid()) return;
  kvm_stats_header header{};
  if (::pread(fd_.get(), &header, sizeof header, 0) != static_cast<ssize_t>(sizeof header)) {
    fd_.reset();
    return;
  }
  // Each descriptor is the fixed struct followed by name_size bytes of name.
  const std::size_t stride = sizeof(uapi::StatsDesc) + header.name_size;
  std::vector<std::byte> raw(stride * header.num_desc);
  if (::pread(fd_.get(), raw.data(), raw.size(), header.desc_offset) != static_cast<ssize_t>(raw.size())) {
    fd_.reset();
    return;
  }
  data_offset_ = header.data_offset;
  for (std::uint32_t i = 0; i < header.num_desc; ++i) {
    uapi::StatsDesc desc{};
    std::memcpy(&desc, raw.data() + i * stride, sizeof desc);
    const char* name = reinterpret_cast<const char*>(raw.data() + i * stride + sizeof desc);
    const std::size_t name_length = strnlen(name, header.name_size);
    data_words_ = std::max<std::uint32_t>(data_words_, desc.offset / 8 + desc.size);
    if (desc.size == 1) descriptors_.push_back({std::string(name, name_length), desc.offset / 8});
  }
}

std::map<std::string, std::uint64_t> BinaryStats::snapshot() const {
  std::map<std::string, std::uint64_t> values;
  if (!fd_.valid()) return values;
  std::vector<std::uint64_t> data(data_words_);
  const auto bytes = static_cast<ssize_t>(data.size() * sizeof(std::uint64_t));
  if (::pread(fd_.get(), data.data(), data.size() * sizeof(std::uint64_t), data_offset_) != bytes) return values;
  for (const auto& desc : descriptors_) values[desc.name] = data[desc.offset];
  return values;
}

bool BinaryStats::has(std::string_view name) const {
  return std::any_of(descriptors_.begin(), descriptors_.end(), [&](const Descriptor& d) { return d.name == name; });
}

std::optional<std::uint64_t> BinaryStats::value(std::string_view name) const {
  if (!fd_.valid()) return std::nullopt;
  for (const auto& desc : descriptors_) {
    if (desc.name != name) continue;
    std::uint64_t v = 0;
    const auto at = static_cast<off_t>(data_offset_ + desc.offset * sizeof v);
    if (::pread(fd_.get(), &v, sizeof v, at) != static_cast<ssize_t>(sizeof v)) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

}  // namespace lockvisor::kvm
