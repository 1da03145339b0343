#include "vmm/lab/matrix.h"

#include <charconv>

#include "vmm/host/host_cpus.h"
#include "vmm/util/error.h"

namespace lockvisor::lab {

std::vector<Point> expand(const Scenario& scenario) {
  Scenario s = scenario;
  if (s.host_cpus.empty()) s.host_cpus = host::usable_cpus();
  expand_for_host(s);
  std::vector<Point> points;
  std::vector<std::size_t> at(s.axes.size(), 0);
  for (unsigned r = 0; r < s.repeats; ++r) {
    std::fill(at.begin(), at.end(), 0);
    while (true) {
      Point p;
      p.index = points.size();
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
      points.push_back(std::move(p));
      // Odometer step, last axis fastest.
      std::size_t a = s.axes.size();
      while (a > 0 && ++at[a - 1] == s.axes[a - 1].values.size()) at[--a] = 0;
      if (a == 0) break;
    }
  }
  return points;
}

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
