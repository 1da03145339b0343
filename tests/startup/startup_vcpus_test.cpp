// bench --startup-vcpus: the list as written, and the counts it resolves to
// against a host KVM's vCPU limit (no KVM needed: the limit is given).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lockvisor/abi/guest_layout.h"
#include "vmm/bench/startup_vcpus.h"
#include "vmm/util/error.h"

namespace lockvisor::bench {
namespace {

const kvm::VcpuLimit kBigKvm{1024, "KVM_CAP_MAX_VCPUS"};  // x86 KVM since Linux 5.15
const kvm::VcpuLimit kHugeKvm{4 * abi::kMaxVcpus, "KVM_CAP_MAX_VCPUS"};  // more than lockvisor's own
const kvm::VcpuLimit kOldKvm{256, "KVM_CAP_MAX_VCPUS"};
const kvm::VcpuLimit kSmallKvm{16, "KVM_CAP_MAX_VCPUS"};

std::string out_of_range(unsigned count) {
  return std::to_string(count) + " is out of range 1.." + std::to_string(abi::kMaxVcpus);
}

std::string usage_error(const std::string& text, const kvm::VcpuLimit& limit = kBigKvm) {
  try {
    resolve_startup_vcpus(parse_startup_vcpus(text), limit);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage) << text;
    return e.what();
  }
  ADD_FAILURE() << text << " was accepted";
  return {};
}

TEST(StartupVcpus, TheDefaultListIsValid) {
  const auto list = parse_startup_vcpus(kDefaultStartupVcpus);
  EXPECT_EQ(list.counts, (std::vector<unsigned>{1, 64, 256}));
  EXPECT_TRUE(list.limit);
}

TEST(StartupVcpus, LimitIsTheHostKvmsCappedAtLockvisorsOwn) {
  EXPECT_EQ(vcpu_limit_here(kHugeKvm), abi::kMaxVcpus);
  // lockvisor's own limit does not bind on the x86 KVMs we know.
  EXPECT_EQ(vcpu_limit_here(kBigKvm), 1024u);
  EXPECT_EQ(vcpu_limit_here(kOldKvm), 256u);
  EXPECT_EQ(vcpu_limit_here(kSmallKvm), 16u);
  EXPECT_EQ(resolve_startup_vcpus(parse_startup_vcpus("1,limit"), kSmallKvm), (std::vector<unsigned>{1, 16}));
}

TEST(StartupVcpus, CountsComeOutAscendingAndOnce) {
  EXPECT_EQ(resolve_startup_vcpus(parse_startup_vcpus(kDefaultStartupVcpus), kBigKvm),
            (std::vector<unsigned>{1, 64, 256, kBigKvm.vcpus}));
  // `limit` is 256 on a KVM that allows 256: the same point as the listed 256.
  EXPECT_EQ(resolve_startup_vcpus(parse_startup_vcpus(kDefaultStartupVcpus), kOldKvm),
            (std::vector<unsigned>{1, 64, 256}));
  EXPECT_EQ(resolve_startup_vcpus(parse_startup_vcpus("8,1,8"), kBigKvm), (std::vector<unsigned>{1, 8}));
  EXPECT_EQ(resolve_startup_vcpus(parse_startup_vcpus("limit"), kHugeKvm), (std::vector<unsigned>{abi::kMaxVcpus}));
}

TEST(StartupVcpus, BadItemsAreRefusedNamingThem) {
  EXPECT_NE(usage_error("").find("an empty item"), std::string::npos);
  EXPECT_NE(usage_error("1,,2").find("an empty item"), std::string::npos);
  EXPECT_NE(usage_error("4,").find("an empty item"), std::string::npos);
  EXPECT_NE(usage_error("0").find(out_of_range(0)), std::string::npos);
  EXPECT_NE(usage_error(std::to_string(abi::kMaxVcpus + 1), kHugeKvm).find(out_of_range(abi::kMaxVcpus + 1)),
            std::string::npos);
  EXPECT_NE(usage_error("4294967296").find("out of range"), std::string::npos);
  EXPECT_NE(usage_error("1, 2").find("' 2' is neither"), std::string::npos);
  EXPECT_NE(usage_error("+2").find("'+2' is neither"), std::string::npos);
  EXPECT_NE(usage_error("LIMIT").find("'LIMIT' is neither"), std::string::npos);
}

TEST(StartupVcpus, CountsAboveTheHostKvmsLimitAreRefused) {
  const std::string message = usage_error("1,64", kSmallKvm);
  EXPECT_EQ(message, "--startup-vcpus 64: this host's KVM allows at most 16 vCPUs per VM (KVM_CAP_MAX_VCPUS)");
  EXPECT_EQ(resolve_startup_vcpus(parse_startup_vcpus("16"), kSmallKvm), (std::vector<unsigned>{16}));
}

TEST(StartupVcpus, TheDefaultListLeavesOutWhatTheHostKvmCannotRun) {
  // On a KVM that allows 16 vCPUs the default measures 1 and 16 (its `limit`), not 64 or 256.
  EXPECT_EQ(resolve_startup_vcpus(parse_startup_vcpus(kDefaultStartupVcpus), kSmallKvm, AboveLimit::kLeaveOut),
            (std::vector<unsigned>{1, 16}));
}

}  // namespace
}  // namespace lockvisor::bench
