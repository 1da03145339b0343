#include "vmm/host/cpu_set.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "vmm/host/host_cpus.h"
#include "vmm/util/error.h"

namespace lockvisor::host {
namespace {

int parse_cpu_number(std::string_view text, const std::string& whole) {
  int value = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 0 || value >= CPU_SETSIZE)
    fail("bad CPU list '{}': '{}' is not a CPU number", whole, text);
  return value;
}

std::vector<int> from_cpu_set(const cpu_set_t& set) {
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

}  // namespace

std::vector<int> parse_cpu_list(const std::string& text) {
  if (text.empty()) fail("bad CPU list '': it names no CPU");
  std::vector<int> cpus;
  std::string_view rest(text);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const auto dash = item.find('-');
    if (dash == std::string_view::npos) {
      cpus.push_back(parse_cpu_number(item, text));
      continue;
    }
    const int first = parse_cpu_number(item.substr(0, dash), text);
    const int last = parse_cpu_number(item.substr(dash + 1), text);
    if (last < first) fail("bad CPU list '{}': range {}-{} runs backwards", text, first, last);
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) fail_host("sched_getaffinity: {}", std::strerror(errno));
  return from_cpu_set(set);
}

int host_cpu_count() { return static_cast<int>(sysconf(_SC_NPROCESSORS_CONF)); }

void validate_cpus(const std::vector<int>& cpus, const char* option) {
  if (const char* declared = std::getenv(kHostCpusVariable); declared != nullptr && *declared != '\0') {
    // A plan for another host (a dry-run): its CPUs, not this one's.
    const auto usable = usable_cpus();
    for (int cpu : cpus)
      if (!std::binary_search(usable.begin(), usable.end(), cpu))
        fail("{}: CPU {} is not among the declared host CPUs ({}={})", option, cpu, kHostCpusVariable, declared);
    return;
  }
  const int count = host_cpu_count();
  const auto allowed = allowed_cpus();
  for (int cpu : cpus) {
    if (cpu >= count) fail("{}: CPU {} does not exist (this host has CPUs 0-{})", option, cpu, count - 1);
    if (!std::binary_search(allowed.begin(), allowed.end(), cpu))
      fail("{}: CPU {} is not allowed for this process (allowed: {})", option, cpu, format_cpu_list(allowed));
  }
}

std::vector<int> thread_cpus(const std::vector<int>& cpus, std::size_t index, bool spread) {
  if (cpus.empty() || !spread) return cpus;
  return {cpus[index % cpus.size()]};
}

void set_thread_affinity(pthread_t thread, const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  if (const int err = pthread_setaffinity_np(thread, sizeof set, &set); err != 0)
    fail_host("cannot pin a vCPU thread to CPUs {}: {}", format_cpu_list(cpus), std::strerror(err));
}

std::vector<int> thread_affinity(pthread_t thread) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pthread_getaffinity_np(thread, sizeof set, &set) != 0) return {};
  return from_cpu_set(set);
}

}  // namespace lockvisor::host
