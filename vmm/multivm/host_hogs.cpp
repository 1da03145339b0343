#include "vmm/multivm/host_hogs.h"

#include <pthread.h>
#include <time.h>

#include <fmt/format.h>

#include "vmm/host/cpu_set.h"

namespace lockvisor::multivm {
namespace {

double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

HostHogs::HostHogs(unsigned count, std::vector<int> cpus)
    : cpus_(cpus.empty() ? host::allowed_cpus() : std::move(cpus)), started_(std::chrono::steady_clock::now()) {
  for (unsigned i = 0; i < count; ++i) {
    auto hog = std::make_unique<Hog>();
    hog->cpu = cpus_.at(i % cpus_.size());
    Hog* h = hog.get();
    hog->thread = std::thread([this, h] {
      // The signal mask is inherited (stop signals stay blocked here, see
      // machine/stop_signals.h). Pinning failure only loses the placement:
      // the hog still competes for the CPUs this process may use.
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(h->cpu, &set);
      ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set);
      const double start = thread_cpu_seconds();
      while (!stopping_.load(std::memory_order_relaxed)) {
        // Busy work the compiler cannot drop; the flag is checked every ~10 us.
        for (int spin = 0; spin < 10000; ++spin) asm volatile("" ::: "memory");
      }
      h->cpu_seconds = thread_cpu_seconds() - start;
    });
    hogs_.push_back(std::move(hog));
  }
}

HostHogs::~HostHogs() { stop(); }

nlohmann::json HostHogs::stop() {
  if (!report_.is_null()) return report_;
  stopping_ = true;
  for (auto& h : hogs_) h->thread.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  double total = 0;
  auto per_hog = nlohmann::json::array();
  for (const auto& h : hogs_) {
    total += h->cpu_seconds;
    per_hog.push_back({{"cpu", h->cpu}, {"cpu_seconds", h->cpu_seconds.load()}});
  }
  const double count = static_cast<double>(hogs_.size());
  report_ = {{"count", hogs_.size()},
             {"pcpus", host::format_cpu_list(cpus_)},
             {"wall_s", wall},
             {"cpu_seconds", total},
             {"cpu_share", count > 0 && wall > 0 ? total / (wall * count) : 0.0},
             {"per_hog", per_hog}};
  return report_;
}

std::string hogs_line(const nlohmann::json& r) {
  return fmt::format("hogs: {} on host CPUs {} got {:.3f} CPU-s in {:.3f} s ({:.0f}% of a CPU each)",
                     r.at("count").get<unsigned>(), r.at("pcpus").get<std::string>(), r.at("cpu_seconds").get<double>(),
                     r.at("wall_s").get<double>(), 100 * r.at("cpu_share").get<double>());
}

}  // namespace lockvisor::multivm
