// Host CPU hogs: N busy threads, "the host is busy with something else", as
// one flag (`lockvisor run --hogs N`, single VM or several). Hog i is pinned
// to CPU i mod |cpus| of the given set, at the same priority as the vCPU
// threads, and spins until stop(); what it got is its own thread CPU time
// (CLOCK_THREAD_CPUTIME_ID), so the report says how much of the host the
// hogs actually took, not how much they asked for.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockvisor::multivm {

// At most this many hogs: far more than any host has CPUs, still a bound.
inline constexpr unsigned kMaxHogs = 256;

class HostHogs {
 public:
  // Starts `count` hogs on `cpus` (empty: the CPUs this process may use).
  HostHogs(unsigned count, std::vector<int> cpus);
  ~HostHogs();  // stops them if stop() was not called
  HostHogs(const HostHogs&) = delete;
  HostHogs& operator=(const HostHogs&) = delete;

  // Stops and joins the hogs, and returns what they got:
  // {"count", "pcpus", "wall_s", "cpu_seconds", "cpu_share" (cpu_seconds /
  //  (wall_s * count)), "per_hog": [{"cpu", "cpu_seconds"}]}.
  nlohmann::json stop();

 private:
  struct Hog {
    int cpu = -1;
    std::atomic<double> cpu_seconds{0};
    std::thread thread;
  };
  std::vector<int> cpus_;
  std::atomic<bool> stopping_{false};
  std::vector<std::unique_ptr<Hog>> hogs_;
  std::chrono::steady_clock::time_point started_;
  nlohmann::json report_;
};

// One line for the text report: "hogs: 2 on CPUs 0-1 got 0.61 CPU-s in 0.50 s (61% of their CPUs)".
std::string hogs_line(const nlohmann::json& report);

}  // namespace lockvisor::multivm
