// --vnuma parsing and validation (vmm/machine/vnuma.h): both spellings, the
// pinning they imply, and a one-line usage error for every bad topology.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/ci_required.h"
#include "vmm/host/cpu_set.h"
#include "vmm/machine/machine.h"
#include "vmm/machine/vnuma.h"
#include "vmm/util/error.h"

namespace lockvisor::machine {
namespace {

std::string usage_error(const std::string& text, unsigned vcpus, const std::vector<int>& host_cpus,
                        bool pcpus_given = false) {
  try {
    parse_vnuma(text, vcpus, host_cpus, pcpus_given);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "not one line: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "--vnuma '" << text << "' was accepted";
  return {};
}

TEST(Vnuma, CountSplitsVcpusAndHostCpusInOrder) {
  const VnumaTopology t = parse_vnuma("2", 8, {0, 1}, true);
  ASSERT_EQ(t.nodes(), 2u);
  EXPECT_EQ(t.vcpu_node, (std::vector<unsigned>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(t.node_cpus, (std::vector<std::vector<int>>{{0}, {1}}));
  EXPECT_EQ(format_vnuma(t), "0-3@0,4-7@1");
}

TEST(Vnuma, UnevenCountsStillCoverEverything) {
  const VnumaTopology t = parse_vnuma("3", 7, {0, 1, 2, 3}, true);
  ASSERT_EQ(t.nodes(), 3u);
  EXPECT_EQ(t.vcpu_node, (std::vector<unsigned>{0, 0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(t.node_cpus, (std::vector<std::vector<int>>{{0, 1}, {2}, {3}}));
  EXPECT_EQ(format_vnuma(t), "0-2@0-1,3-4@2,5-6@3");
}

TEST(Vnuma, ExplicitFormAndItsRoundTrip) {
  // The explicit form checks that its host CPUs exist and are allowed.
  const std::vector<int> allowed = host::allowed_cpus();
  if (allowed.size() < 2) LOCKVISOR_SKIP_OUTSIDE_CI("needs two allowed host CPUs");
  const std::string a = std::to_string(allowed[0]), b = std::to_string(allowed[1]);
  const VnumaTopology t = parse_vnuma("0+2@" + a + ",1+3@" + b, 4, {}, false);
  ASSERT_EQ(t.nodes(), 2u);
  EXPECT_EQ(t.vcpu_node, (std::vector<unsigned>{0, 1, 0, 1}));
  EXPECT_EQ(t.node_cpus, (std::vector<std::vector<int>>{{allowed[0]}, {allowed[1]}}));
  EXPECT_EQ(format_vnuma(t), "0+2@" + a + ",1+3@" + b);
  const VnumaTopology again = parse_vnuma(format_vnuma(t), 4, {}, false);
  EXPECT_EQ(again.vcpu_node, t.vcpu_node);
  EXPECT_EQ(again.node_cpus, t.node_cpus);
}

TEST(Vnuma, ExplicitFormRefusesAPartialOverlapOfHostCpus) {
  EXPECT_NE(usage_error("0@0+1,1@1", 2, {}).find("host CPU 1 is in two nodes"), std::string::npos);
  EXPECT_NE(usage_error("0@0,1@0+1", 2, {}).find("host CPU 0 is in two nodes"), std::string::npos);
  // A topology not built by the parser is held to the same rule.
  VnumaTopology t;
  t.vcpu_node = {0, 1};
  t.node_cpus = {{0, 1}, {1}};
  try {
    validate_vnuma(t, 2);
    ADD_FAILURE() << "a partial overlap was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("host CPU 1 is in two nodes"), std::string::npos) << e.what();
  }
}

TEST(Vnuma, NodesNamingTheSameHostCpusShareThem) {
  const std::vector<int> allowed = host::allowed_cpus();
  if (allowed.size() < 2) LOCKVISOR_SKIP_OUTSIDE_CI("needs two allowed host CPUs");
  const std::string both = std::to_string(allowed[0]) + "-" + std::to_string(allowed[1]);
  if (allowed[1] != allowed[0] + 1) LOCKVISOR_SKIP_OUTSIDE_CI("needs two adjacent allowed host CPUs");
  const VnumaTopology t = parse_vnuma("0-3@" + both + ",4-7@" + both, 8, {}, false);
  ASSERT_EQ(t.nodes(), 2u);
  EXPECT_TRUE(t.shares_cpus());
  EXPECT_EQ(t.vcpu_node, (std::vector<unsigned>{0, 0, 0, 0, 1, 1, 1, 1}));
  // Spread pins each node's vCPUs round-robin over the shared CPUs, so both
  // nodes have a vCPU on each CPU; float lets every vCPU run on both.
  EXPECT_EQ(vnuma_affinity(t, 0, true), (std::vector<int>{allowed[0]}));
  EXPECT_EQ(vnuma_affinity(t, 4, true), (std::vector<int>{allowed[0]}));
  EXPECT_EQ(vnuma_affinity(t, 5, true), (std::vector<int>{allowed[1]}));
  EXPECT_EQ(vnuma_affinity(t, 7, false), (std::vector<int>{allowed[0], allowed[1]}));
  EXPECT_FALSE(parse_vnuma("2", 8, {0, 1}, true).shares_cpus());
  EXPECT_FALSE(parse_vnuma("1", 8, {0, 1}, true).shares_cpus()) << "one node shares with nobody";
}

TEST(Vnuma, SpreadPinsWithinTheNodeRoundRobin) {
  const VnumaTopology t = parse_vnuma("2", 8, {0, 1, 2, 3}, true);
  EXPECT_EQ(vnuma_affinity(t, 0, true), (std::vector<int>{0}));
  EXPECT_EQ(vnuma_affinity(t, 1, true), (std::vector<int>{1}));
  EXPECT_EQ(vnuma_affinity(t, 2, true), (std::vector<int>{0}));
  EXPECT_EQ(vnuma_affinity(t, 4, true), (std::vector<int>{2}));
  EXPECT_EQ(vnuma_affinity(t, 7, true), (std::vector<int>{3}));
  EXPECT_EQ(vnuma_affinity(t, 5, false), (std::vector<int>{2, 3}));
}

TEST(Vnuma, BadTopologiesAreOneLineUsageErrors) {
  const std::vector<int> two = {0, 1};
  EXPECT_NE(usage_error("0", 4, two).find("between 1 and 16"), std::string::npos);
  EXPECT_NE(usage_error("17", 32, two).find("between 1 and 16"), std::string::npos);
  EXPECT_NE(usage_error("3", 2, two).find("more nodes than the 2 vCPUs"), std::string::npos);
  EXPECT_NE(usage_error("4", 8, two).find("more nodes than the 2 host CPUs"), std::string::npos);
  EXPECT_NE(usage_error("", 2, two).find("--vnuma ''"), std::string::npos);
  EXPECT_NE(usage_error("0-3", 4, two).find("is not VCPUS@HOSTCPUS"), std::string::npos);
  EXPECT_NE(usage_error("0@0@1", 1, two).find("is not VCPUS@HOSTCPUS"), std::string::npos);
  EXPECT_NE(usage_error("0-1@x", 2, two).find("'x' is not a list"), std::string::npos);
  EXPECT_NE(usage_error("0-2@0", 2, two).find("vCPU 2 does not exist"), std::string::npos);
  EXPECT_NE(usage_error("0-1@0,1@0", 2, two).find("vCPU 1 is in nodes 0 and 1"), std::string::npos);
  EXPECT_NE(usage_error("0@0", 2, two).find("vCPU 1 is in no node"), std::string::npos);
  EXPECT_NE(usage_error("0@0,1@1", 2, two, true).find("drop --pcpus"), std::string::npos);
  EXPECT_NE(usage_error("0@0,1@100000", 2, two).find("100000"), std::string::npos);
}

TEST(Vnuma, ValidateConfigChecksTheTopologyAndTheRemoteModel) {
  MachineConfig config;
  config.vcpus = 2;
  config.vnuma_remote_ns = 100;
  EXPECT_THROW(validate_config(config), Error) << "--vnuma-remote-ns without --vnuma";
  config.vnuma = parse_vnuma("2", 2, {0, 1}, true);
  validate_config(config);
  config.vnuma_remote_ns = kMaxVnumaRemoteNs + 1;
  EXPECT_THROW(validate_config(config), Error);
  config.vnuma_remote_ns = 0;
  config.vnuma->vcpu_node = {0, 2};
  EXPECT_THROW(validate_config(config), Error) << "a vCPU in a node that does not exist";
  config.vnuma->vcpu_node = {0, 0};
  EXPECT_THROW(validate_config(config), Error) << "node 1 without a vCPU";
  config.vcpus = 3;
  EXPECT_THROW(validate_config(config), Error) << "a topology for another vCPU count";
}

}  // namespace
}  // namespace lockvisor::machine
