#include "vmm/machine/vnuma.h"

#include <algorithm>
#include <charconv>

#include "lockvisor/abi/boot_info.h"
#include "vmm/host/cpu_set.h"
#include "vmm/util/error.h"

namespace lockvisor::machine {
namespace {

// "N", "N-M" or such ranges joined by '+' (a comma separates nodes): the
// host CPU list parser does the rest, its message prefixed with the option.
std::vector<int> parse_set(std::string_view part, const std::string& whole) {
  std::string list(part);
  std::replace(list.begin(), list.end(), '+', ',');
  try {
    return host::parse_cpu_list(list);
  } catch (const Error&) {
    fail("--vnuma '{}': '{}' is not a list of numbers (N, N-M, joined by '+')", whole, part);
  }
}

std::string format_set(const std::vector<int>& values) {
  std::string text = host::format_cpu_list(values);
  std::replace(text.begin(), text.end(), ',', '+');
  return text;
}

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

VnumaTopology split_evenly(const std::string& text, unsigned vcpus, const std::vector<int>& host_cpus) {
  unsigned nodes = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), nodes);
  if (ec != std::errc() || end != text.data() + text.size() || nodes < 1 || nodes > abi::kMaxVnumaNodes)
    fail("--vnuma {}: the number of nodes must be between 1 and {}", text, abi::kMaxVnumaNodes);
  if (nodes > vcpus) fail("--vnuma {}: more nodes than the {} vCPUs", nodes, vcpus);
  if (nodes > host_cpus.size())
    fail("--vnuma {}: more nodes than the {} host CPUs to split (--pcpus or the allowed CPUs)", nodes,
         host_cpus.size());
  VnumaTopology t;
  t.vcpu_node.resize(vcpus);
  t.node_cpus.resize(nodes);
  for (unsigned i = 0; i < vcpus; ++i) t.vcpu_node[i] = static_cast<unsigned>(std::uint64_t{i} * nodes / vcpus);
  for (std::size_t c = 0; c < host_cpus.size(); ++c)
    t.node_cpus[c * nodes / host_cpus.size()].push_back(host_cpus[c]);
  return t;
}

VnumaTopology parse_explicit(const std::string& text, unsigned vcpus) {
  VnumaTopology t;
  constexpr unsigned kUnassigned = ~0u;
  t.vcpu_node.assign(vcpus, kUnassigned);
  std::vector<int> taken_cpus;
  std::string_view rest(text);
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const auto at = item.find('@');
    if (at == std::string_view::npos || item.find('@', at + 1) != std::string_view::npos)
      fail("--vnuma '{}': '{}' is not VCPUS@HOSTCPUS", text, item);
    const unsigned node = t.nodes();
    if (node == abi::kMaxVnumaNodes) fail("--vnuma '{}': more than {} nodes", text, abi::kMaxVnumaNodes);
    for (const int v : parse_set(item.substr(0, at), text)) {
      if (static_cast<unsigned>(v) >= vcpus) fail("--vnuma '{}': vCPU {} does not exist ({} vCPUs)", text, v, vcpus);
      if (t.vcpu_node[v] != kUnassigned)
        fail("--vnuma '{}': vCPU {} is in nodes {} and {}", text, v, t.vcpu_node[v], node);
      t.vcpu_node[v] = node;
    }
    std::vector<int> cpus = parse_set(item.substr(at + 1), text);  // ascending, no repeats
    taken_cpus.insert(taken_cpus.end(), cpus.begin(), cpus.end());
    t.node_cpus.push_back(std::move(cpus));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  for (unsigned v = 0; v < vcpus; ++v)
    if (t.vcpu_node[v] == kUnassigned) fail("--vnuma '{}': vCPU {} is in no node", text, v);
  host::validate_cpus(taken_cpus, "--vnuma");  // shared nodes list a CPU more than once: harmless here
  return t;
}

}  // namespace

VnumaTopology parse_vnuma(const std::string& text, unsigned vcpus, const std::vector<int>& host_cpus,
                          bool pcpus_given) {
  if (text.empty()) fail("--vnuma '': give a node count or VCPUS@HOSTCPUS,...");
  if (all_digits(text)) return split_evenly(text, vcpus, host_cpus);
  if (pcpus_given) fail("--vnuma '{}': the explicit form names the host CPUs itself; drop --pcpus", text);
  VnumaTopology t = parse_explicit(text, vcpus);
  validate_vnuma(t, vcpus);
  return t;
}

void validate_vnuma(const VnumaTopology& t, unsigned vcpus) {
  if (t.nodes() < 1 || t.nodes() > abi::kMaxVnumaNodes)
    fail("--vnuma: {} nodes, must be between 1 and {}", t.nodes(), abi::kMaxVnumaNodes);
  if (t.vcpu_node.size() != vcpus) fail("--vnuma: the topology is for {} vCPUs, the VM has {}", t.vcpu_node.size(), vcpus);
  std::vector<unsigned> members(t.nodes(), 0);
  for (const unsigned n : t.vcpu_node) {
    if (n >= t.nodes()) fail("--vnuma: vCPU node {} out of range (0..{})", n, t.nodes() - 1);
    ++members[n];
  }
  for (unsigned k = 0; k < t.nodes(); ++k) {
    if (members[k] == 0) fail("--vnuma: node {} has no vCPU", k);
    if (t.node_cpus[k].empty()) fail("--vnuma: node {} has no host CPU", k);
  }
  // Nodes own disjoint host CPUs, or all share the same ones (vnuma.h).
  if (t.shares_cpus()) return;
  std::vector<int> seen;
  for (const auto& cpus : t.node_cpus)
    for (const int c : cpus) {
      if (std::find(seen.begin(), seen.end(), c) != seen.end())
        fail("--vnuma: host CPU {} is in two nodes (nodes share host CPUs only when every node names the same ones)",
             c);
      seen.push_back(c);
    }
}

std::vector<int> vnuma_affinity(const VnumaTopology& t, unsigned vcpu, bool spread) {
  const unsigned node = t.vcpu_node.at(vcpu);
  const std::vector<int>& cpus = t.node_cpus.at(node);
  unsigned rank = 0;  // vcpu's position among its node's vCPUs
  for (unsigned i = 0; i < vcpu; ++i) rank += t.vcpu_node[i] == node ? 1 : 0;
  return host::thread_cpus(cpus, rank, spread);
}

std::string format_vnuma(const VnumaTopology& t) {
  std::string out;
  for (unsigned k = 0; k < t.nodes(); ++k) {
    std::vector<int> vcpus;
    for (unsigned i = 0; i < t.vcpu_node.size(); ++i)
      if (t.vcpu_node[i] == k) vcpus.push_back(static_cast<int>(i));
    if (k > 0) out += ',';
    out += format_set(vcpus) + '@' + format_set(t.node_cpus[k]);
  }
  return out;
}

}  // namespace lockvisor::machine
