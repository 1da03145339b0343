#include "vmm/bench/release_forms.h"

#include <chrono>
#include <exception>
#include <ratio>
#include <thread>
#include <vector>

#include "vmm/host/cpu_set.h"
#include "vmm/metrics/summary.h"
#include "vmm/util/error.h"

namespace lockvisor::bench {
namespace {

// The lock word, on a line of its own. The loops below are the registry's
// own instructions: the take is the fast path's cmpxchg (acquire), each
// release pairs with it.
struct alignas(64) Word {
  std::uint32_t val;
};
Word g_word;

[[gnu::always_inline]] inline bool take() {
  std::uint32_t expected = 0;
  return __atomic_compare_exchange_n(&g_word.val, &expected, 1u, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

enum class Form { kByteStore, kLockedAnd, kWordStore };

// Picoseconds per take + release pair.
template <Form kForm>
[[gnu::noinline]] std::uint64_t ps_per_pair(std::uint64_t pairs) {
  std::uint64_t taken = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < pairs; ++i) {
    taken += take() ? 1 : 0;
    if constexpr (kForm == Form::kByteStore) {
      // Little-endian: byte 0 is the locked byte, as in QSpinWord.
      __atomic_store_n(reinterpret_cast<std::uint8_t*>(&g_word.val), std::uint8_t{0}, __ATOMIC_RELEASE);
    } else if constexpr (kForm == Form::kLockedAnd) {
      __atomic_fetch_and(&g_word.val, ~0xffu, __ATOMIC_RELEASE);
    } else {
      __atomic_store_n(&g_word.val, 0u, __ATOMIC_RELEASE);
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  // Every take must have found the word free: a failed cmpxchg is cheaper
  // than a successful one, and a loop of them would measure something else.
  if (taken != pairs) fail_host("release forms: {} of {} takes found the word held", pairs - taken, pairs);
  const auto ps = std::chrono::duration_cast<std::chrono::duration<std::int64_t, std::pico>>(t1 - t0).count();
  return static_cast<std::uint64_t>(ps) / pairs;
}

double median_ns(std::vector<std::uint64_t> ps) { return *metrics::percentile(std::move(ps), 50) / 1000.0; }

}  // namespace

ReleaseFormCosts measure_release_forms(int cpu, unsigned rounds, std::uint64_t pairs) {
  if (rounds == 0 || pairs == 0) fail_host("release forms: rounds and pairs must be at least 1");
  std::vector<std::uint64_t> byte_store, locked_and, word_store;
  // The caller's own affinity stays as it is: the loops run on a thread of
  // their own, joined before this returns (an error there is rethrown here).
  std::exception_ptr error;
  std::jthread worker([&] {
    try {
      host::set_thread_affinity(pthread_self(), {cpu});
      for (unsigned r = 0; r < rounds; ++r) {
        byte_store.push_back(ps_per_pair<Form::kByteStore>(pairs));
        locked_and.push_back(ps_per_pair<Form::kLockedAnd>(pairs));
        word_store.push_back(ps_per_pair<Form::kWordStore>(pairs));
      }
    } catch (...) {
      error = std::current_exception();
    }
  });
  worker.join();
  if (error) std::rethrow_exception(error);
  return {median_ns(std::move(byte_store)), median_ns(std::move(locked_and)), median_ns(std::move(word_store)), rounds,
          pairs};
}

}  // namespace lockvisor::bench
