// The few out-of-line helpers GCC 12 calls in RV64 freestanding code, which a
// hosted program gets from libgcc and libatomic. The guest links neither:
// the cross toolchain's libgcc is built for the lp64d ABI, and the guest is
// lp64 (guest/arch/riscv64/CMakeLists.txt says why).
//
// Sub-word atomics: GCC 12 inlines no byte-wide exchange or compare-exchange
// on RISC-V (the A extension has word and doubleword AMOs and LR/SC only), so
// it calls __atomic_exchange_1 and __atomic_compare_exchange_1 for the PV
// locks' byte-wide node states. Here, as in libatomic, each is a strong
// compare-exchange loop on the aligned 32-bit word holding the byte, which
// changes that byte only: lock-free, and as ordered as the loop's word CAS,
// which is seq_cst, so at least the order the caller asked for.
#include "lockvisor/abi/types.h"

namespace {
using lockvisor::abi::u32;
using lockvisor::abi::u64;
using lockvisor::abi::u8;

struct ByteInWord {
  u32* word;
  unsigned shift;
  u32 mask;
};
ByteInWord locate(volatile void* p) {
  const u64 a = reinterpret_cast<u64>(p);
  const unsigned shift = static_cast<unsigned>(a & 3) * 8;  // little-endian
  return ByteInWord{reinterpret_cast<u32*>(a & ~u64{3}), shift, u32{0xFF} << shift};
}
}  // namespace

extern "C" {

u8 __atomic_exchange_1(volatile void* p, u8 value, int) {
  const ByteInWord b = locate(p);
  u32 old = __atomic_load_n(b.word, __ATOMIC_RELAXED);
  u32 desired;
  do desired = (old & ~b.mask) | (u32{value} << b.shift);
  while (!__atomic_compare_exchange_n(b.word, &old, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
  return static_cast<u8>((old & b.mask) >> b.shift);
}

bool __atomic_compare_exchange_1(volatile void* p, void* expected, u8 desired, bool, int, int) {
  const ByteInWord b = locate(p);
  u8* const want = static_cast<u8*>(expected);
  u32 old = __atomic_load_n(b.word, __ATOMIC_RELAXED);
  for (;;) {
    const u8 seen = static_cast<u8>((old & b.mask) >> b.shift);
    if (seen != *want) {
      *want = seen;
      return false;
    }
    const u32 next = (old & ~b.mask) | (u32{desired} << b.shift);
    if (__atomic_compare_exchange_n(b.word, &old, next, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return true;
  }
}

// Count leading / trailing zeros of a nonzero 64-bit value (the builtins'
// contract: 0 is undefined) by halving: six steps.
int __clzdi2(u64 x) {
  int n = 0;
  for (unsigned half = 32; half != 0; half /= 2) {
    if ((x >> (64 - half)) == 0) {
      n += static_cast<int>(half);
      x <<= half;
    }
  }
  return n;
}
int __ctzdi2(u64 x) {
  int n = 0;
  for (unsigned half = 32; half != 0; half /= 2) {
    if ((x << (64 - half)) == 0) {
      n += static_cast<int>(half);
      x >>= half;
    }
  }
  return n;
}

}  // extern "C"
