// futex-hash: every worker calls FUTEX_WAIT on futex words shared by all
// workers, with an expected value the word never has, so each call returns
// EAGAIN at once. In the kernel (kernel/futex/waitwake.c, futex_wait_setup)
// that call hashes the word's address to a bucket of the global futex hash
// table and takes the bucket's spinlock (futex_q_lock) before it reads the
// word and sees the mismatch: one spin_lock/spin_unlock of a hash-bucket
// lock per operation, and nothing that sleeps. Words share buckets (the
// table has 256 buckets per possible CPU, rounded up to a power of two), and
// every worker picks words at random from the same set, so workers meet on
// the same bucket locks; fewer words (lockvisor.futexes) mean more meetings.
//
// This is the operation of `perf bench futex hash` (Davidlohr Bueso,
// tools/perf/bench/futex-hash.c), whose words are per thread; here they are
// shared so that the contention can be chosen. FUTEX_WAKE would not do: a
// wake with no waiters checks the bucket's waiter count and returns without
// taking the lock (Davidlohr Bueso, "futex: Avoid taking the hb->lock if
// there's nothing to wake up", linux-kernel, January 2014).
#include <cerrno>
#include <cstring>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guest/linux/workloads/workloads.h"

namespace lockvisor::linux_init {
namespace {

class FutexHash final : public Workload {
 public:
  std::optional<std::string> prepare(unsigned, const Parameters& parameters) override {
    words_ = std::vector<std::uint32_t>(parameters.futexes, 0);
    return std::nullopt;
  }

  void run(Worker& worker) override {
    const std::size_t n = words_.size();
    worker.loop([&] {
      std::uint32_t* word = &words_[worker.random() % n];
      // The words stay 0 for the whole run, so expecting 1 never sleeps.
      const long r = ::syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, 1u, nullptr, nullptr, 0);
      if (r == -1 && errno == EAGAIN) return true;
      worker.fail(r == 0 ? std::string("FUTEX_WAIT returned 0 on a mismatched value")
                         : std::string("FUTEX_WAIT failed: ") + std::strerror(errno));
      return false;
    });
  }

 private:
  std::vector<std::uint32_t> words_;
};

}  // namespace

std::unique_ptr<Workload> make_futex_hash_workload() { return std::make_unique<FutexHash>(); }

}  // namespace lockvisor::linux_init
