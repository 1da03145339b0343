#include "vmm/lab/side_by_side.h"

#include <algorithm>
#include <bit>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "vmm/host/cpu_set.h"
#include "vmm/machine/stop_signals.h"

namespace lockvisor::lab {
namespace {

bool is_per_vm(const std::string& setting) { return setting.rfind(kVmSettingPrefix, 0) == 0; }

// One point in flight: its thread, and what it gave back.
struct Running {
  const Point* point = nullptr;
  std::vector<int> cpus;
  PointRun run;
  std::jthread thread;
};

}  // namespace

unsigned default_jobs(std::size_t host_cpus) {
  return host_cpus < kSideBySideMinCpus ? 1u : static_cast<unsigned>(host_cpus / 2);
}

CpuDemand cpu_demand(const Point& p, const std::vector<int>& host_cpus) {
  const std::string* pcpus = lookup(p.settings, "pcpus");
  const bool own_vm_cpus = std::any_of(p.settings.begin(), p.settings.end(),
                                       [](const auto& nv) { return is_per_vm(nv.first) && nv.first.ends_with(":pcpus"); });
  if (pcpus == nullptr || own_vm_cpus) return {false, host_cpus};
  const bool from_word = std::any_of(p.terms.begin(), p.terms.end(), [](const PlacementTerm& t) {
    return t.setting == "pcpus";
  });
  return {from_word, host::parse_cpu_list(*pcpus)};
}

std::vector<std::string> arguments_on(const Point& p, const std::vector<int>& cpus) {
  SettingValues settings = p.settings;
  if (lookup(settings, "pcpus") != nullptr) assign(settings, "pcpus", host::format_cpu_list(cpus));
  return run_arguments(settings);
}

bool run_side_by_side(const std::vector<const Point*>& todo, const std::vector<int>& host_cpus, unsigned jobs,
                      const std::function<PointRun(const Point&, const std::vector<std::string>&)>& run,
                      const std::function<void(const Point&, const PointRun&, const std::vector<int>&)>& finished) {
  std::vector<int> free_cpus = host_cpus;
  std::mutex mutex;
  std::condition_variable ended;
  std::deque<std::unique_ptr<Running>> done;  // ended, not yet reported
  std::vector<Running*> running;
  bool stopped = false;

  // Reports one ended point (waiting for one if `wait`); false if none.
  const auto reap = [&](bool wait) {
    std::unique_ptr<Running> r;
    {
      std::unique_lock lock(mutex);
      if (wait) ended.wait(lock, [&] { return !done.empty(); });
      if (done.empty()) return false;
      r = std::move(done.front());
      done.pop_front();
    }
    r->thread.join();
    running.erase(std::find(running.begin(), running.end(), r.get()));
    free_cpus.insert(free_cpus.end(), r->cpus.begin(), r->cpus.end());
    std::sort(free_cpus.begin(), free_cpus.end());
    if (r->run.interrupted || machine::stop_signal() != 0) stopped = true;
    if (!stopped) finished(*r->point, r->run, r->cpus);
    return true;
  };
  // The CPUs `d` gets now, or none if they are not free.
  const auto take = [&](const CpuDemand& d) -> std::optional<std::vector<int>> {
    std::vector<int> got;
    if (d.movable) {
      // The lowest free block of the usable CPUs that starts, as the planned
      // CPUs do (the first ones), at a multiple of the point's size rounded up
      // to a power of two: on a host whose cores, core pairs and caches come
      // in aligned powers of two, the point then sits in the cache topology
      // as its planned CPUs do, and its numbers stay comparable with a run
      // one at a time. (The lowest free CPUs whatever they are put two-CPU
      // points on CPUs 0 and 13, say, across a cache domain that 0-1 share.)
      const std::size_t k = d.cpus.size(), stride = std::bit_ceil(std::max<std::size_t>(k, 1));
      for (std::size_t start = 0; got.empty() && start + k <= host_cpus.size(); start += stride) {
        const auto first = host_cpus.begin() + static_cast<std::ptrdiff_t>(start);
        std::vector<int> block(first, first + static_cast<std::ptrdiff_t>(k));
        std::sort(block.begin(), block.end());
        if (std::includes(free_cpus.begin(), free_cpus.end(), block.begin(), block.end())) got = std::move(block);
      }
      if (got.size() != k) return std::nullopt;
    } else {
      for (int cpu : d.cpus)
        if (std::find(host_cpus.begin(), host_cpus.end(), cpu) != host_cpus.end()) got.push_back(cpu);
      if (!std::includes(free_cpus.begin(), free_cpus.end(), got.begin(), got.end())) return std::nullopt;
    }
    std::vector<int> rest;
    std::set_difference(free_cpus.begin(), free_cpus.end(), got.begin(), got.end(), std::back_inserter(rest));
    free_cpus = std::move(rest);
    return d.movable ? got : d.cpus;
  };

  // Whatever ends the loop (a stop, a record that cannot be written), the
  // points in flight are waited for: their threads use this frame.
  struct WaitForAll {
    std::function<void()> wait;
    ~WaitForAll() { wait(); }
  } wait_for_all{[&] {
    stopped = stopped || std::uncaught_exceptions() > 0;
    while (!running.empty()) reap(true);
  }};
  for (const Point* p : todo) {
    const auto demand = cpu_demand(*p, host_cpus);
    std::optional<std::vector<int>> cpus;
    while (!stopped && machine::stop_signal() == 0 && !(running.size() < jobs && (cpus = take(demand))))
      reap(true);
    if (stopped || machine::stop_signal() != 0) break;
    auto r = std::make_unique<Running>();
    r->point = p;
    r->cpus = *cpus;
    Running* raw = r.get();
    running.push_back(raw);
    const auto args = arguments_on(*p, *cpus);
    raw->thread = std::jthread([&, owned = std::move(r), args]() mutable {
      owned->run = run(*owned->point, args);
      std::lock_guard lock(mutex);
      done.push_back(std::move(owned));
      ended.notify_one();
    });
    while (reap(false)) {
    }
  }
  wait_for_all.wait();
  return !stopped && machine::stop_signal() == 0;
}

}  // namespace lockvisor::lab
