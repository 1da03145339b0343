// The virtual NUMA topology of a VM (--vnuma): which node each vCPU is in,
// and which host CPUs each node's vCPU threads run on.
//
// Two spellings:
//   --vnuma N            vCPUs 0..V-1 and the host CPUs (--pcpus, else every
//                        allowed CPU) are each cut into N contiguous groups in
//                        order; group k of both is node k. Node k gets
//                        vCPUs [k*V/N, (k+1)*V/N).
//   --vnuma A@B,C@D,...  node k is the k-th item: vCPUs A (N or N-M) run on
//                        host CPUs B (N or N-M). Every vCPU is in exactly one
//                        node, and no host CPU belongs to two nodes unless
//                        every node names the same host CPUs: then the nodes
//                        share them (shares_cpus()).
// A virtual node is a label the guest reads from BootInfo and a pinning of
// threads; on a host without NUMA it costs nothing by itself, which is why
// --vnuma-remote-ns can add a modelled remote cost.
//
// Shared host CPUs are a model, not a topology: the nodes then label vCPUs
// only, and every node's vCPU threads run on the same CPUs (pinned in turn
// with --pin spread), so the vCPUs that run at one moment may be of one node
// or of several. Nodes of one CPU each
// (the only split a 2-CPU host allows) can never have two of their vCPUs
// running at once, so a lock that keeps handoffs within a node has nothing
// to choose from; with shared CPUs its choice shows. Every report says when
// the nodes share host CPUs.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

namespace lockvisor::machine {

// --vnuma-remote-ns: at most 1 ms per remote handoff.
inline constexpr unsigned kMaxVnumaRemoteNs = 1000000;

struct VnumaTopology {
  std::vector<unsigned> vcpu_node;         // node of vCPU i
  std::vector<std::vector<int>> node_cpus;  // host CPUs of node k, ascending

  unsigned nodes() const { return static_cast<unsigned>(node_cpus.size()); }
  // Several nodes, all on the same host CPUs (the model above).
  bool shares_cpus() const {
    return nodes() > 1 && std::all_of(node_cpus.begin(), node_cpus.end(),
                                      [this](const std::vector<int>& cpus) { return cpus == node_cpus.front(); });
  }
};

// Parses `text` for a VM of `vcpus` vCPUs. `host_cpus` are the CPUs the N
// form splits (the --pcpus list, else the allowed CPUs); `pcpus_given` says
// whether --pcpus was given (the explicit form names its own host CPUs and
// refuses --pcpus beside it). Throws lockvisor::Error (usage) with a
// one-line reason naming --vnuma.
VnumaTopology parse_vnuma(const std::string& text, unsigned vcpus, const std::vector<int>& host_cpus,
                          bool pcpus_given);

// Checks a topology against the VM (for configurations not built by
// parse_vnuma); throws lockvisor::Error (usage).
void validate_vnuma(const VnumaTopology& topology, unsigned vcpus);

// Host CPUs of vCPU i's thread: spread -> one CPU of its node (round-robin
// over the node's vCPUs), float -> all of its node's CPUs.
std::vector<int> vnuma_affinity(const VnumaTopology& topology, unsigned vcpu, bool spread);

// The explicit spelling of a topology (what the report shows), e.g.
// "0-3@0,4-7@1".
std::string format_vnuma(const VnumaTopology& topology);

}  // namespace lockvisor::machine
