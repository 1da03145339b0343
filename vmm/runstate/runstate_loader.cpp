#include "vmm/runstate/runstate_loader.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <utility>

#include <spdlog/spdlog.h>

#include "vmm/util/error.h"

namespace lockvisor::runstate {
namespace {
constexpr int kLoaderNice = 10;
}  // namespace

RunStateLoader::RunStateLoader(Load load, unsigned max_waiters) : load_(std::move(load)), waiting_(max_waiters) {
  // Private and never written: every read finds the kernel's zero page.
  void* p = ::mmap(nullptr, abi::kRunStateBytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail_host("mmap of the run-state zero page: {}", std::strerror(errno));
  view_ = Mapping(p, abi::kRunStateBytes);
  view_address_ = p;
  if (!load_) finished_ = true;
}

RunStateLoader::~RunStateLoader() {
  hurry();
  if (thread_.joinable()) thread_.join();
}

void RunStateLoader::hurry() {
  std::lock_guard lock(mutex_);
  hurry_locked();
}

// Under mutex_: a loader thread that has not set finished_ is still alive,
// so its tid is not yet anybody else's.
void RunStateLoader::hurry_locked() {
  hurried_.store(true);
  if (finished_) return;
  if (const pid_t tid = tid_.load(); tid > 0) ::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), 0);
}

void RunStateLoader::start() {
  {
    std::lock_guard lock(mutex_);
    if (started_ || finished_) return;
    started_ = true;
  }
  // The thread is created outside mutex_: a vCPU thread asks for the page
  // (page_or_notify) on its way to its first KVM_RUN, and a thread creation
  // takes tens of microseconds here. Only the caller that set started_ gets
  // here, and the destructor, the only other user of thread_, runs after it.
  // Never throws: the VMM starts the load while vCPU threads run, and a
  // thread it cannot create (no memory for its stack, a thread limit) only
  // means no page.
  try {
    thread_ = std::thread([this] { run(load_); });
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    failure_ = fmt::format("cannot start the loader thread: {}", e.what());
    finished_ = true;
    done_.notify_all();
  }
}

void RunStateLoader::cancel(const std::string& why) {
  std::lock_guard lock(mutex_);
  if (started_ || finished_) return;
  failure_ = why;
  finished_ = true;
  done_.notify_all();
}

void RunStateLoader::run(const Load& load) {
  // The load is CPU work (BTF parsing, verification) that competes with the
  // VM it serves: at nice 10 (CFS weight 110 against 1024) a vCPU thread
  // that wants the CPU gets it first, and an idle CPU still runs the load at
  // full speed. Once the start-up is over or someone waits for it, it goes
  // back to nice 0 (hurry()). Best effort: without the calls the load
  // merely competes.
  const auto self = static_cast<id_t>(::gettid());
  ::setpriority(PRIO_PROCESS, self, kLoaderNice);
  // Then published: a hurry() that comes first is seen here, one that comes
  // later sees the tid (both sequentially consistent).
  tid_.store(static_cast<pid_t>(self));
  if (hurried_.load()) ::setpriority(PRIO_PROCESS, self, 0);
  std::optional<RunStatePage> page;
  std::string why;
  try {
    page.emplace(load());
    // Before anyone registers: the reset page (all zeros) replaces the
    // zeros; the view_ member is only touched here and in the destructor.
    page->take_view(view_);
  } catch (const std::exception& e) {
    why = e.what();
    page.reset();
  } catch (...) {  // nothing may leave the thread: std::terminate would end the run unreported
    page.reset();
  }
  std::lock_guard lock(mutex_);
  if (page) {
    page_ = std::move(page);
    published_at_ = Clock::now();
    published_.store(&*page_, std::memory_order_release);
    // Under the lock: cancel_notify() returns only once no wake can run.
    for (auto& wake : waiting_)
      if (wake) wake();
  } else {
    failure_ = why.empty() ? "the run-state page did not load" : why;
    spdlog::debug("runstate: {}", failure_);
  }
  for (auto& wake : waiting_) wake = nullptr;
  finished_ = true;
  done_.notify_all();
}

RunStatePage* RunStateLoader::page_or_notify(unsigned id, std::function<void()> wake) {
  std::lock_guard lock(mutex_);
  if (page_) return &*page_;
  if (id >= waiting_.size()) fail("run-state loader: waiter {} is outside 0..{}", id, waiting_.size() - 1);
  if (!finished_) waiting_[id] = std::move(wake);
  return nullptr;
}

void RunStateLoader::cancel_notify(unsigned id) {
  std::lock_guard lock(mutex_);
  if (id < waiting_.size()) waiting_[id] = nullptr;
}

RunStatePage* RunStateLoader::wait() {
  start();
  std::unique_lock lock(mutex_);
  hurry_locked();
  done_.wait(lock, [this] { return finished_; });
  return page_ ? &*page_ : nullptr;
}

std::string RunStateLoader::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

std::optional<RunStateLoader::Clock::time_point> RunStateLoader::published_at() const {
  std::lock_guard lock(mutex_);
  return published_at_;
}

}  // namespace lockvisor::runstate
