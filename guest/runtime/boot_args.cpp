// BootInfo::args ("key=value key=value ..."), read by key: arg_u64 and
// arg_str of runtime/boot.h. Architecture-neutral: both guests compile it.
#include "runtime/boot.h"
#include "runtime/string.h"

namespace guest {

namespace {
// Finds "key=" at a word start in args; returns the value's start or nullptr.
const char* find_arg(const char* key) {
  const char* args = boot().args;
  const u32 key_length = str_length(key, 64);
  for (u32 i = 0; i < kProgramArgsBytes && args[i] != '\0';) {
    while (i < kProgramArgsBytes && args[i] == ' ') ++i;
    const u32 start = i;
    while (i < kProgramArgsBytes && args[i] != ' ' && args[i] != '\0') ++i;
    if (i - start > key_length && str_equal_n(args + start, key, key_length) && args[start + key_length] == '=')
      return args + start + key_length + 1;
  }
  return nullptr;
}
}  // namespace

u64 arg_u64(const char* key, u64 fallback) {
  const char* value = find_arg(key);
  if (value == nullptr) return fallback;
  u64 result = 0;
  for (; *value >= '0' && *value <= '9'; ++value) result = result * 10 + static_cast<u64>(*value - '0');
  return result;
}

bool arg_str(const char* key, char* out, u32 capacity) {
  const char* value = find_arg(key);
  if (value == nullptr || capacity == 0) return false;
  u32 n = 0;
  while (n + 1 < capacity && value[n] != ' ' && value[n] != '\0') {
    out[n] = value[n];
    ++n;
  }
  out[n] = '\0';
  return true;
}

}  // namespace guest
