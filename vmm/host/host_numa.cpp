#include "vmm/host/host_numa.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "vmm/host/cpu_set.h"
#include "vmm/util/error.h"

namespace lockvisor::host {

std::vector<HostNumaNode> host_numa_nodes() {
  std::vector<HostNumaNode> nodes;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) != 0 || name.size() == 4 ||
        !std::all_of(name.begin() + 4, name.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    HostNumaNode node{std::stoi(name.substr(4)), {}};
    std::ifstream list(entry.path() / "cpulist");
    std::string text;
    if (std::getline(list, text) && !text.empty()) {
      try {
        node.cpus = parse_cpu_list(text);
      } catch (const Error&) {
        node.cpus.clear();  // an unreadable list: shown as no CPUs
      }
    }
    nodes.push_back(std::move(node));
  }
  std::sort(nodes.begin(), nodes.end(), [](const HostNumaNode& a, const HostNumaNode& b) { return a.id < b.id; });
  return nodes;
}

}  // namespace lockvisor::host
