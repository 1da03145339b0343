#include "vmm/lab/host_slice.h"

#include <fmt/format.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "vmm/host/cpu_set.h"

namespace lockvisor::lab {
namespace {

struct SchedStat {
  double run_ns = 0;
  double switched_in = 0;
};

std::optional<SchedStat> read_schedstat() {
  std::ifstream in("/proc/thread-self/schedstat");
  double run = 0, wait = 0, slices = 0;
  if (!(in >> run >> wait >> slices)) return std::nullopt;
  return SchedStat{run, slices};
}

// `se.slice : 1400000` in /proc/thread-self/sched (EEVDF's slice request).
std::optional<double> eevdf_slice_ns() {
  std::ifstream in("/proc/thread-self/sched");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("se.slice", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) return std::nullopt;
    std::istringstream value(line.substr(colon + 1));
    double ns = 0;
    if (value >> ns && ns > 0) return ns;
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<double> debugfs_base_slice_ns() {
  std::ifstream in("/sys/kernel/debug/sched/base_slice_ns");
  double ns = 0;
  if (in >> ns && ns > 0) return ns;
  return std::nullopt;
}

// Two threads spinning on `cpu`: the mean run interval between switches.
struct Measured {
  double run_ns = 0;
  double switches = 0;
};

std::optional<Measured> measure_on(int cpu) {
  std::atomic<int> ready{0};
  std::atomic<bool> failed{false};
  SchedStat delta[2];
  auto spin = [&](int i) {
    try {
      host::set_thread_affinity(pthread_self(), {cpu});
    } catch (const std::exception&) {
      failed = true;
    }
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    const auto a = read_schedstat();
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(kHostSliceMeasureMs);
    while (std::chrono::steady_clock::now() < end) {
    }
    const auto b = read_schedstat();
    if (!a || !b) {
      failed = true;
      return;
    }
    delta[i] = {b->run_ns - a->run_ns, b->switched_in - a->switched_in};
  };
  {
    std::jthread t0(spin, 0), t1(spin, 1);
  }
  const double run = delta[0].run_ns + delta[1].run_ns;
  const double switches = delta[0].switched_in + delta[1].switched_in;
  if (failed || switches < 4 || run <= 0) return std::nullopt;  // too few switches to call it a slice
  return Measured{run / switches, switches};
}

nlohmann::json or_null(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

}  // namespace

nlohmann::json host_slice_description() {
  const auto cpus = host::allowed_cpus();
  const int cpu = cpus.empty() ? -1 : cpus.front();
  const auto measured = cpu >= 0 ? measure_on(cpu) : std::nullopt;
  const auto slice = eevdf_slice_ns();
  const auto base = debugfs_base_slice_ns();
  nlohmann::json j = {
      {"definition",
       "mean time a CPU-bound thread runs before the host switches to another CPU-bound thread on its CPU"},
      {"cpu", cpu},
      {"measured_run_ns", measured ? nlohmann::json(measured->run_ns) : nlohmann::json(nullptr)},
      {"measured_switches", measured ? nlohmann::json(measured->switches) : nlohmann::json(nullptr)},
      {"eevdf_slice_ns", or_null(slice)},
      {"base_slice_ns", or_null(base)}};
  if (measured) {
    j["ns"] = measured->run_ns;
    j["source"] = fmt::format("measured: 2 spinning threads on CPU {} for {} ms, /proc/thread-self/schedstat", cpu,
                              kHostSliceMeasureMs);
  } else if (slice) {
    j["ns"] = *slice;
    j["source"] = "fallback: EEVDF se.slice of this thread (/proc/thread-self/sched); a lower bound, the slice is "
                  "enforced at a scheduler tick";
  } else {
    j["ns"] = nullptr;
    j["source"] = "unknown: neither measurable here nor in /proc/thread-self/sched";
  }
  return j;
}

}  // namespace lockvisor::lab
