// The virtual NUMA topology reaches the guest: boots the `vnuma` program
// (guest/programs/vnuma.cpp) and compares what every vCPU read through
// runtime/numa.h with the --vnuma the VMM was given, the vCPU threads'
// placement and the report's settings. Label "kvm".
#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>

#include "tests/support/ci_required.h"
#include "tests/support/kvm_required.h"
#include "tests/support/run_failure.h"
#include "vmm/guest_image.h"
#include "vmm/host/cpu_set.h"
#include "vmm/machine/machine.h"
#include "vmm/report/run_report.h"

namespace lockvisor::machine {
namespace {

MachineConfig vnuma_config(unsigned vcpus) {
  MachineConfig config;
  config.vcpus = vcpus;
  config.program = "vnuma";
  config.echo_guest_prints = false;
  config.capture_serial = true;
  config.timeout_s = 60;
  return config;
}

std::uint64_t value(const RunResult& r, unsigned vcpu, const char* key) {
  const ResultValue* v = r.result(vcpu, key);
  if (v == nullptr || v->values.size() != 1) {
    ADD_FAILURE() << "vCPU " << vcpu << " reported no " << key;
    return ~std::uint64_t{0};
  }
  return v->values[0];
}

std::uint64_t packed_nodes(const VnumaTopology& t) {
  std::uint64_t packed = 0;
  for (unsigned i = 0; i < t.vcpu_node.size() && i < 16; ++i) packed |= std::uint64_t{t.vcpu_node[i]} << (4 * i);
  return packed;
}

TEST(VnumaMachine, GuestReadsBackTheTopologyAndThreadsRunOnTheirNode) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const std::vector<int> allowed = host::allowed_cpus();
  if (allowed.size() < 2) LOCKVISOR_SKIP_OUTSIDE_CI("needs two allowed host CPUs");
  const std::string a = std::to_string(allowed[0]), b = std::to_string(allowed[1]);
  // Both spellings; the explicit one with interleaved nodes, so that a
  // topology the VMM ignored (everything on node 0, or nodes by halves)
  // cannot pass.
  // And nodes sharing both CPUs (the model of docs/vnuma.md): the guest sees
  // the same two nodes, each thread is pinned to one of the shared CPUs.
  for (const std::string& spec :
       {std::string("2"), "0+2+5@" + a + ",1+3+4@" + b, "0+2+5@" + a + "+" + b + ",1+3+4@" + a + "+" + b}) {
    SCOPED_TRACE("--vnuma " + spec);
    MachineConfig config = vnuma_config(6);
    config.vnuma = parse_vnuma(spec, config.vcpus, {allowed[0], allowed[1]}, spec == "2");
    config.vnuma_remote_ns = 250;
    Machine vm(*kvm, config, embedded_guest_image());
    const RunResult r = vm.run();
    ASSERT_EQ(r.outcome, Outcome::kCompleted) << test::run_failure(r);
    ASSERT_EQ(r.vcpus.size(), 6u);
    for (unsigned i = 0; i < 6; ++i) {
      SCOPED_TRACE(fmt::format("vCPU {}", i));
      EXPECT_EQ(value(r, i, "node"), config.vnuma->vcpu_node[i]);
      EXPECT_EQ(value(r, i, "nodes"), 2u);
      EXPECT_EQ(value(r, i, "remote_ns"), 250u);
      EXPECT_EQ(value(r, i, "peers"), packed_nodes(*config.vnuma));
      const std::vector<int>& node_cpus = config.vnuma->node_cpus[config.vnuma->vcpu_node[i]];
      ASSERT_EQ(r.vcpus[i].affinity.size(), 1u);
      EXPECT_NE(std::find(node_cpus.begin(), node_cpus.end(), r.vcpus[i].affinity[0]), node_cpus.end())
          << "vCPU thread on host CPU " << r.vcpus[i].affinity[0] << ", outside its node";
    }
    const auto json = report::run_to_json(r, config);
    EXPECT_EQ(json["settings"]["vnuma"], format_vnuma(*config.vnuma));
    EXPECT_EQ(json["settings"]["vnuma_remote_ns"], 250);
    EXPECT_EQ(json["settings"]["vnuma_remote_cost"], "modelled");
    EXPECT_EQ(json["settings"]["vnuma_host_cpus"], config.vnuma->shares_cpus() ? "shared" : "per-node");
  }
}

TEST(VnumaMachine, WithoutVnumaEveryVcpuIsOnNodeZeroOfOne) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const MachineConfig config = vnuma_config(3);
  Machine vm(*kvm, config, embedded_guest_image());
  const RunResult r = vm.run();
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << test::run_failure(r);
  for (unsigned i = 0; i < 3; ++i) {
    EXPECT_EQ(value(r, i, "node"), 0u);
    EXPECT_EQ(value(r, i, "nodes"), 1u);
    EXPECT_EQ(value(r, i, "remote_ns"), 0u);
  }
  const auto json = report::run_to_json(r, config);
  EXPECT_TRUE(json["settings"]["vnuma"].is_null());
  EXPECT_TRUE(json["settings"]["vnuma_host_cpus"].is_null());
  EXPECT_EQ(json["settings"]["vnuma_remote_cost"], "none");
}

}  // namespace
}  // namespace lockvisor::machine
