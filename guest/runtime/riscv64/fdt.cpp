#include "runtime/riscv64/fdt.h"

#include "runtime/string.h"

namespace guest::riscv {
namespace {

constexpr u32 kFdtMagic = 0xd00dfeed;
// Structure block tokens.
constexpr u32 kBeginNode = 1;
constexpr u32 kEndNode = 2;
constexpr u32 kProp = 3;
constexpr u32 kNop = 4;

// Every integer in the blob is big-endian.
u32 be32(const u8* p) { return u32{p[0]} << 24 | u32{p[1]} << 16 | u32{p[2]} << 8 | u32{p[3]}; }
u32 align4(u32 n) { return (n + 3) & ~u32{3}; }

}  // namespace

u64 fdt_timebase_hz(const void* dtb) {
  const u8* const base = static_cast<const u8*>(dtb);
  if (base == nullptr || be32(base) != kFdtMagic) return 0;
  const u32 total = be32(base + 4);
  const u8* const strings = base + be32(base + 12);
  u32 at = be32(base + 8);  // the structure block
  // Depth 1 is the root node; the property sits in /cpus, at depth 2.
  unsigned depth = 0;
  bool in_cpus = false;
  while (at + 4 <= total) {
    const u32 token = be32(base + at);
    at += 4;
    if (token == kBeginNode) {
      const char* name = reinterpret_cast<const char*>(base + at);
      depth++;
      if (depth == 2) in_cpus = str_equal(name, "cpus");
      at += align4(str_length(name, total - at) + 1);
    } else if (token == kEndNode) {
      if (depth == 2) in_cpus = false;
      depth--;
    } else if (token == kProp) {
      const u32 len = be32(base + at);
      const char* name = reinterpret_cast<const char*>(strings + be32(base + at + 4));
      const u8* value = base + at + 8;
      if (in_cpus && depth == 2 && str_equal(name, "timebase-frequency"))
        return len == 8 ? u64{be32(value)} << 32 | be32(value + 4) : len == 4 ? be32(value) : 0;
      at += 8 + align4(len);
    } else if (token != kNop) {
      return 0;  // the end, or a token this reader does not know
    }
  }
  return 0;
}

}  // namespace guest::riscv
