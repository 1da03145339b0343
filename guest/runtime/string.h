// Freestanding string helpers and the mem* functions the compiler may call.
#pragma once
#include "lockvisor/abi/types.h"

extern "C" {
void* memcpy(void* dst, const void* src, __SIZE_TYPE__ n);
void* memmove(void* dst, const void* src, __SIZE_TYPE__ n);
void* memset(void* dst, int c, __SIZE_TYPE__ n);
int memcmp(const void* a, const void* b, __SIZE_TYPE__ n);
}

namespace guest {
using lockvisor::abi::u32;

inline u32 str_length(const char* s, u32 max) {
  u32 n = 0;
  while (n < max && s[n] != '\0') ++n;
  return n;
}

inline bool str_equal_n(const char* a, const char* b, u32 n) {
  for (u32 i = 0; i < n; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

inline bool str_equal(const char* a, const char* b) {
  for (;; ++a, ++b) {
    if (*a != *b) return false;
    if (*a == '\0') return true;
  }
}

// Copies at most capacity-1 bytes and always terminates.
inline void str_copy(char* dst, const char* src, u32 capacity) {
  u32 n = 0;
  for (; n + 1 < capacity && src[n] != '\0'; ++n) dst[n] = src[n];
  dst[n] = '\0';
}

}  // namespace guest
