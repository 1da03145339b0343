// What a lock's release costs on this CPU when the same CPU takes the lock
// again at once, for the three ways the registry's locks release a 32-bit
// lock word taken with a 32-bit cmpxchg (0 -> 1):
//   - a store of the locked byte (qspinlock, and pvbounded's store release
//     with timed heads): the other bytes of the word may change meanwhile,
//     so only byte 0 is written;
//   - a locked read-modify-write of the word (pvbounded with kicked heads,
//     pvqspinlock's cmpxchg alike): it drains the store buffer;
//   - a store of the whole word (tas): nothing else lives in it.
// The first is the cheapest where the next acquisition comes later; taken
// again at once, the cmpxchg's read overlaps a narrower store still in the
// store buffer, which some CPUs cannot forward (the read then waits until
// the store is written to the cache), so on those it costs more than the
// locked release. `lockvisor bench` prints the three beside each other so
// that a CPU's answer is measured, not assumed (docs/pvbounded.md, "Timed
// heads").
#pragma once
#include <cstdint>

namespace lockvisor::bench {

struct ReleaseFormCosts {
  double byte_store_ns = 0;  // per take + release pair, median over the rounds
  double locked_and_ns = 0;
  double word_store_ns = 0;
  unsigned rounds = 0;
  std::uint64_t pairs = 0;  // per round and form
};

// On a thread of its own pinned to host CPU `cpu`: `rounds` rounds, each
// timing `pairs` take + release pairs of every form in turn (interleaved, so
// that noise hits all three alike). rounds >= 1, pairs >= 1.
ReleaseFormCosts measure_release_forms(int cpu, unsigned rounds, std::uint64_t pairs);

}  // namespace lockvisor::bench
