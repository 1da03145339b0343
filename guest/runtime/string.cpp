#include "runtime/string.h"

// Byte loops on purpose: the compiler must not turn these back into calls to
// themselves, so this file is built with -fno-builtin (guest/CMakeLists.txt).
extern "C" {
void* memcpy(void* dst, const void* src, __SIZE_TYPE__ n) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  while (n--) *d++ = *s++;
  return dst;
}

void* memmove(void* dst, const void* src, __SIZE_TYPE__ n) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (d < s) {
    while (n--) *d++ = *s++;
  } else {
    while (n--) d[n] = s[n];
  }
  return dst;
}

void* memset(void* dst, int c, __SIZE_TYPE__ n) {
  auto* d = static_cast<unsigned char*>(dst);
  while (n--) *d++ = static_cast<unsigned char>(c);
  return dst;
}

int memcmp(const void* a, const void* b, __SIZE_TYPE__ n) {
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  for (; n--; ++x, ++y)
    if (*x != *y) return *x < *y ? -1 : 1;
  return 0;
}
}
