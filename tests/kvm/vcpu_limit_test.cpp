// The host KVM's vCPU limit (kvm::vcpu_limit): which capability answer wins.
#include <gtest/gtest.h>

#include <string>

#include "vmm/kvm/kvm_system.h"

namespace lockvisor::kvm {
namespace {

TEST(VcpuLimit, MaxVcpusCapabilityIsTheLimit) {
  const VcpuLimit limit = vcpu_limit(1024, 710);
  EXPECT_EQ(limit.vcpus, 1024u);
  EXPECT_EQ(std::string(limit.source), "KVM_CAP_MAX_VCPUS");
}

TEST(VcpuLimit, NrVcpusWithoutMaxVcpus) {
  const VcpuLimit limit = vcpu_limit(0, 288);
  EXPECT_EQ(limit.vcpus, 288u);
  EXPECT_EQ(std::string(limit.source), "KVM_CAP_NR_VCPUS");
}

TEST(VcpuLimit, FourWithoutEither) {
  const VcpuLimit limit = vcpu_limit(0, 0);
  EXPECT_EQ(limit.vcpus, 4u);
  EXPECT_NE(std::string(limit.source).find("default"), std::string::npos);
}

}  // namespace
}  // namespace lockvisor::kvm
