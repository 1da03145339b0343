// The run-state page, loaded beside the VM build instead of before it
// (docs/runstate.md, "Start-up cost"). Loading and attaching the BPF program
// costs from a fraction of a millisecond (a pooled, attached program) to
// tens (a cold load: BTF parsing, verification, the tracepoint's
// synchronization), longer than the whole rest of a VM's start-up; so the
// guest boots on a page of zeros and the live page replaces it, at the same
// address, once it is ready.
//
// The view: one read-only page whose address never changes while the loader
// lives, handed to KVM as the read-only memslot. It reads zeros ("unknown"
// for every vCPU, the ABI's meaning of a page nobody writes) until the page
// is published, then the live page (RunStatePage::take_view), whose records
// were reset before (all zeros: still "unknown" until each vCPU thread
// registers and is next switched). So a reader never sees a record the host
// did not write for this run: no "running" or "preempted" from a page that
// is not attached, nor from an earlier run's pooled page.
//
// Who uses the page: threads that need it once it is there (vCPU threads
// that started before it) ask page_or_notify(): they get the page, or a call
// of their `wake` on the loader's thread when it is published, at most once,
// never after cancel_notify() returned. Threads that need the final answer
// (the services, the report) call wait().
#pragma once
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "vmm/runstate/runstate_page.h"
#include "vmm/util/mapping.h"

namespace lockvisor::runstate {

class RunStateLoader {
 public:
  using Clock = std::chrono::steady_clock;
  // Produces the page (RunStatePage::open_shared, in the VMM); throws
  // lockvisor::Error when it cannot.
  using Load = std::function<RunStatePage()>;

  // Maps the view (zeros); start() runs `load` on a thread of its own (an
  // empty `load`: zeros for good, nothing to start). Waiters have ids
  // 0..max_waiters-1 (the vCPU indexes).
  explicit RunStateLoader(Load load, unsigned max_waiters = abi::kRunStateMaxVcpus);
  // Waits for the load (a cold one may still be running when a short run
  // ends: its program is then pinned for the next run). Remove the memslot
  // that shows view() before: the view is unmapped here.
  ~RunStateLoader();
  RunStateLoader(const RunStateLoader&) = delete;
  RunStateLoader& operator=(const RunStateLoader&) = delete;

  // Starts the load (once; later calls do nothing; never throws: a thread
  // that cannot be created is a failed load). Start it where its work
  // competes least with what is on the way to the first guest instruction:
  // the VMM starts it once the vCPU threads are started. The loader's
  // thread runs at nice 10, below the vCPU threads, until hurry().
  void start();
  // A load not started yet never will be (the run ended first): wait()
  // then returns nullptr at once, with `why` as the failure. Does nothing
  // to a load already started.
  void cancel(const std::string& why);
  // Back to nice 0: the start-up it must not delay is over (the VMM calls
  // it at the guest's first exit), or someone waits for the load (wait()
  // and the destructor call it). Raising a priority needs CAP_SYS_NICE
  // (root has it); without it the load stays at nice 10.
  void hurry();

  // The page's host address, for the guest's memslot: fixed for the
  // loader's life, PROT_READ.
  const void* view() const { return view_address_; }

  // The live page once published (acquire), else nullptr. Never changes
  // again once set.
  RunStatePage* page() const { return published_.load(std::memory_order_acquire); }

  // The page if published; else nullptr, and `wake` (keyed by `id`) is
  // called once on the loader's thread when it is. A failed load calls no
  // one. `wake` must not block or call back into the loader. Allocates
  // nothing for a `wake` that fits std::function's own storage (a lambda
  // holding a pointer): a vCPU thread calls it before its first guest entry.
  RunStatePage* page_or_notify(unsigned id, std::function<void()> wake);
  // After it returns, `id`'s wake is never called.
  void cancel_notify(unsigned id);

  // Blocks until the load has ended (starting it if need be): the page, or
  // nullptr (failure() says why).
  RunStatePage* wait();
  // After wait(): why there is no page ("" when there is one).
  std::string failure() const;
  // When the page was published (nullopt: not, or not yet).
  std::optional<Clock::time_point> published_at() const;

 private:
  void run(const Load& load);
  void hurry_locked();

  const Load load_;
  Mapping view_;  // the zeros, until the page takes the range over
  const void* view_address_ = nullptr;
  mutable std::mutex mutex_;
  std::condition_variable done_;
  bool started_ = false;
  bool finished_ = false;
  std::optional<RunStatePage> page_;
  std::atomic<RunStatePage*> published_{nullptr};
  std::optional<Clock::time_point> published_at_;
  std::string failure_;
  std::vector<std::function<void()>> waiting_;  // by id; empty: not waiting
  std::atomic<pid_t> tid_{0};  // the loader thread's, once it runs
  std::atomic<bool> hurried_{false};
  std::thread thread_;
};

}  // namespace lockvisor::runstate
