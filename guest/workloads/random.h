// random.h: a tiny seeded PRNG for the workloads (xorshift64*, seeded with
// splitmix64).
//
// Runs are reproducible from WorkloadParams::seed: CPU c draws the stream
// Rng(seed, c), so the sequence of (lock, hold time) choices a CPU makes
// depends on nothing else -- not on timing, not on the other CPUs.  (Which
// acquisitions actually happen within a duration-bound run still depends on
// timing: a faster CPU gets further along its stream.)
#pragma once

#include "lockvisor/abi/types.h"

namespace lockvisor::workloads {

using lockvisor::abi::u64;

// splitmix64 (Steele, Lea, Flood): a good 64-bit mixer; used to derive the
// xorshift state so that nearby seeds/CPUs give unrelated streams.
constexpr u64 splitmix64(u64& x) {
  u64 z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class Rng {
 public:
  constexpr Rng(u64 seed, u64 stream) {
    u64 x = seed;
    const u64 a = splitmix64(x);
    x ^= stream * 0xD1B54A32D192ED03ull;
    s_ = a ^ splitmix64(x);
    if (s_ == 0) s_ = 0x2545F4914F6CDD1Dull;  // xorshift state must not be 0
  }

  // xorshift64* (Vigna): full period 2^64-1; the multiply fixes the weak low bits.
  constexpr u64 next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 0x2545F4914F6CDD1Dull;
  }

  // Uniform in [0, n) (Lemire's multiply-high; bias < n / 2^64, negligible);
  // 0 when n == 0.  Always consumes exactly one next().
  constexpr u64 below(u64 n) {
    return static_cast<u64>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

 private:
  u64 s_;
};

}  // namespace lockvisor::workloads
