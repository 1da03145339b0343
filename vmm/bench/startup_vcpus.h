// The vCPU counts `lockvisor bench --startup` measures start-up and memory
// at (--startup-vcpus): a comma-separated list of counts and the word
// `limit`, the most vCPUs one VM may have here (the host KVM's limit, capped
// at lockvisor's own, abi::kMaxVcpus).
#pragma once
#include <string_view>
#include <vector>

#include "vmm/kvm/kvm_system.h"

namespace lockvisor::bench {

inline constexpr std::string_view kVcpuLimitWord = "limit";
inline constexpr const char* kDefaultStartupVcpus = "1,64,256,limit";

struct StartupVcpus {
  std::vector<unsigned> counts;  // as listed
  bool limit = false;            // `limit` was listed
};

// Throws a usage lockvisor::Error, one line naming the bad item: an empty
// item, one that is neither a decimal count nor `limit`, a count of 0 or
// above abi::kMaxVcpus. Needs no KVM.
StartupVcpus parse_startup_vcpus(std::string_view text);

// The most vCPUs one lockvisor VM may have on a KVM with this limit.
unsigned vcpu_limit_here(const kvm::VcpuLimit& kvm_limit);

// What to do with a listed count above the host KVM's limit: a count the
// user wrote is refused; the default list's are left out (its `limit`
// stands for them), so that the default runs on any KVM.
enum class AboveLimit { kRefuse, kLeaveOut };

// The counts to measure, ascending and each once (`limit` resolved, so it
// may coincide with a listed count). With kRefuse, throws a usage
// lockvisor::Error for a count above the host KVM's limit.
std::vector<unsigned> resolve_startup_vcpus(const StartupVcpus& list, const kvm::VcpuLimit& kvm_limit,
                                            AboveLimit above = AboveLimit::kRefuse);

}  // namespace lockvisor::bench
