#include "vmm/bench/startup_vcpus.h"

#include <algorithm>
#include <charconv>

#include "lockvisor/abi/guest_layout.h"
#include "vmm/util/error.h"

namespace lockvisor::bench {

StartupVcpus parse_startup_vcpus(std::string_view text) {
  StartupVcpus list;
  for (std::size_t start = 0;;) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    if (item.empty()) fail("--startup-vcpus '{}': an empty item (a count or '{}' between commas)", text, kVcpuLimitWord);
    if (item == kVcpuLimitWord) {
      list.limit = true;
    } else {
      unsigned count = 0;
      const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), count);
      if (error == std::errc::invalid_argument || end != item.data() + item.size())
        fail("--startup-vcpus: '{}' is neither a vCPU count nor '{}'", item, kVcpuLimitWord);
      if (error == std::errc::result_out_of_range || count < 1 || count > abi::kMaxVcpus)
        fail("--startup-vcpus: {} is out of range 1..{} (lockvisor's most vCPUs)", item, abi::kMaxVcpus);
      list.counts.push_back(count);
    }
    if (comma == text.size()) break;
    start = comma + 1;
  }
  return list;
}

unsigned vcpu_limit_here(const kvm::VcpuLimit& kvm_limit) { return std::min(kvm_limit.vcpus, abi::kMaxVcpus); }

std::vector<unsigned> resolve_startup_vcpus(const StartupVcpus& list, const kvm::VcpuLimit& kvm_limit,
                                            AboveLimit above) {
  std::vector<unsigned> counts;
  for (const unsigned count : list.counts) {
    if (count <= kvm_limit.vcpus)
      counts.push_back(count);
    else if (above == AboveLimit::kRefuse)
      fail("--startup-vcpus {}: this host's KVM allows at most {} vCPUs per VM ({})", count, kvm_limit.vcpus,
           kvm_limit.source);
  }
  if (list.limit) counts.push_back(vcpu_limit_here(kvm_limit));
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

}  // namespace lockvisor::bench
