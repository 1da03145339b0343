#include "vmm/lab/matrix.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "vmm/experiment/lock_name.h"
#include "vmm/host/host_cpus.h"
#include "vmm/linuxboot/linux_boot_plan.h"
#include "vmm/util/error.h"

namespace lockvisor::lab {

namespace {

// Why `p`, whose vCPU count came from a host-relative word, cannot run, or "".
std::string beyond_limit(const Point& p, unsigned vcpu_limit) {
  const auto term = std::find_if(p.terms.begin(), p.terms.end(), [](const PlacementTerm& t) { return t.setting == "vcpus"; });
  if (term == p.terms.end()) return {};
  const unsigned vcpus = static_cast<unsigned>(std::stoul(term->resolved));
  if (lookup(p.settings, "kernel") != nullptr && vcpus > linuxboot::kMaxVcpus)
    return fmt::format("a Linux guest has at most {} vCPUs", linuxboot::kMaxVcpus);
  // Native points are host threads: no KVM limits them, only `run`'s range.
  const std::string* native = lookup(p.settings, "native");
  if (native != nullptr && *native == "true")
    return vcpus > own_vcpu_limit() ? fmt::format("--vcpus takes at most {}", own_vcpu_limit()) : std::string();
  if (vcpus > vcpu_limit) return fmt::format("a VM has at most {} vCPUs", vcpu_limit);
  return {};
}

// The scenario as its points are made: sweeps expanded and min_cpus values
// left out for its host CPUs.
Scenario for_host(const Scenario& scenario) {
  Scenario s = scenario;
  if (s.host_cpus.empty()) s.host_cpus = host::usable_cpus();
  expand_for_host(s);
  return s;
}

std::uint64_t points_of(const Scenario& s) {
  std::uint64_t n = s.repeats;
  for (const auto& a : s.axes)
    n = a.values.size() != 0 && n > kMaxLabPoints * 1000 / a.values.size() ? kMaxLabPoints * 1000 : n * a.values.size();
  return n;
}

}  // namespace

std::uint64_t matrix_size(const Scenario& s) { return points_of(for_host(s)); }

Expansion expand_matrix(const Scenario& scenario) {
  const Scenario s = for_host(scenario);
  if (const auto n = points_of(s); n > kMaxLabPoints) {
    std::string sizes;
    for (std::size_t a = 0; a < s.axes.size(); ++a)
      sizes += fmt::format("{}{}", a == 0 ? "" : " x ", s.axes[a].values.size());
    fail("scenario '{}': {}{} points ({} axis values x {} repeat{}): more than a lab plans (at most {}); use fewer "
         "axis values or repeats, or several scenarios",
         s.name, n >= kMaxLabPoints * 1000 ? "over " : "", n, sizes, s.repeats, s.repeats == 1 ? "" : "s",
         kMaxLabPoints);
  }
  const unsigned vcpu_limit = s.vcpu_limit != 0 ? s.vcpu_limit : own_vcpu_limit();
  Expansion out;
  std::vector<Point>& points = out.points;
  std::size_t index = 0;
  std::vector<std::size_t> at(s.axes.size(), 0);
  for (unsigned r = 0; r < s.repeats; ++r) {
    std::fill(at.begin(), at.end(), 0);
    while (true) {
      Point p;
      p.index = index++;
      p.repeat = r;
      p.settings = s.fixed;
      for (std::size_t a = 0; a < s.axes.size(); ++a) {
        const auto& value = s.axes[a].values[at[a]];
        p.labels.emplace_back(s.axes[a].name, value.label);
        p.key += (a ? "," : "") + s.axes[a].name + "=" + value.label;
        for (const auto& [name, v] : value.settings) assign(p.settings, name, v);
      }
      p.terms = resolve_placement(p.settings, s.host_cpus);
      p.id = p.key + "#r" + std::to_string(r);
      if (const auto vm_only = s.vm_only.find(p.key); vm_only != s.vm_only.end()) {
        if (r == 0)
          out.vm_only.push_back({p.key, p.labels, 0, vm_only->second});
      } else if (auto why = beyond_limit(p, vcpu_limit); !why.empty()) {
        if (r == 0)
          out.left_out.push_back({p.key, p.labels, static_cast<unsigned>(std::stoul(*lookup(p.settings, "vcpus"))),
                                  std::move(why)});
      } else {
        points.push_back(std::move(p));
      }
      // Odometer step, last axis fastest.
      std::size_t a = s.axes.size();
      while (a > 0 && ++at[a - 1] == s.axes[a - 1].values.size()) at[--a] = 0;
      if (a == 0) break;
    }
  }
  if (points.empty() && !out.left_out.empty())
    fail("on {} host CPUs every point is beyond a limit (the first, {}: {} vCPUs, and {}); plan it for fewer "
         "CPUs (taskset -c 0-{} lockvisor lab ...)",
         s.host_cpus.size(), out.left_out.front().key, out.left_out.front().vcpus, out.left_out.front().why,
         std::max<std::size_t>(s.host_cpus.size() / 2, 1) - 1);
  return out;
}

std::vector<Point> expand(const Scenario& s) { return expand_matrix(s).points; }

Shard parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  Shard shard;
  auto number = [&](std::string_view part, unsigned& out) {
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
    return ec == std::errc() && end == part.data() + part.size() && !part.empty();
  };
  const std::string_view whole(text);
  if (slash == std::string::npos || !number(whole.substr(0, slash), shard.index) ||
      !number(whole.substr(slash + 1), shard.count) || shard.count < 1 || shard.index < 1 || shard.index > shard.count)
    fail("--shard '{}': expected I/N with 1 <= I <= N, e.g. 2/4", text);
  return shard;
}

std::vector<Point> shard_points(const std::vector<Point>& all, Shard shard) {
  std::vector<Point> mine;
  for (const auto& p : all)
    if (p.index % shard.count == shard.index - 1) mine.push_back(p);
  return mine;
}

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace lockvisor::lab
