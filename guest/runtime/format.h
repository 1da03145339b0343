// A fixed-capacity text buffer with just enough formatting for reports:
// strings, signed/unsigned decimals and hex. Truncates, never overflows.
#pragma once
#include "lockvisor/abi/types.h"

namespace guest {
using namespace lockvisor::abi;

class Text {
 public:
  static constexpr u32 kCapacity = 240;
  Text() { buf_[0] = '\0'; }
  Text& str(const char* s) {
    while (*s) put(*s++);
    return *this;
  }
  Text& u(u64 v) {
    char digits[20];
    int n = 0;
    do digits[n++] = static_cast<char>('0' + v % 10);
    while ((v /= 10) != 0);
    while (n) put(digits[--n]);
    return *this;
  }
  Text& i(i64 v) {
    if (v < 0) {
      put('-');
      return u(static_cast<u64>(-(v + 1)) + 1);
    }
    return u(static_cast<u64>(v));
  }
  Text& hex(u64 v) {
    str("0x");
    bool started = false;
    for (int shift = 60; shift >= 0; shift -= 4) {
      const unsigned nibble = (v >> shift) & 0xF;
      if (!nibble && !started && shift) continue;
      started = true;
      put("0123456789abcdef"[nibble]);
    }
    return *this;
  }
  const char* c_str() const { return buf_; }

 private:
  void put(char c) {
    if (len_ + 1 < kCapacity) {
      buf_[len_++] = c;
      buf_[len_] = '\0';
    }
  }
  char buf_[kCapacity];
  u32 len_ = 0;
};

}  // namespace guest
