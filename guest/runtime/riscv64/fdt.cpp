#include "runtime/riscv64/fdt.h"

#include "lockvisor/abi/riscv_boot.h"
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
u64 be64(const u8* p) { return u64{be32(p)} << 32 | be32(p + 4); }
u32 align4(u32 n) { return (n + 3) & ~u32{3}; }

// Whether `name` is "cpu" or starts with "cpu@" (a unit address follows).
bool is_cpu_node(const char* name) {
  return name[0] == 'c' && name[1] == 'p' && name[2] == 'u' && (name[3] == '\0' || name[3] == '@');
}

}  // namespace

FdtFacts fdt_read(const void* dtb) {
  FdtFacts facts{};
  const u8* const base = static_cast<const u8*>(dtb);
  if (base == nullptr || be32(base) != kFdtMagic) return facts;
  const u32 total = be32(base + 4);
  const u8* const strings = base + be32(base + 12);
  u32 at = be32(base + 8);  // the structure block
  // Depth 1 is the root node; /cpus and /chosen are at depth 2, the cpu
  // nodes at depth 3.
  unsigned depth = 0;
  bool in_cpus = false;
  bool in_chosen = false;
  while (at + 4 <= total) {
    const u32 token = be32(base + at);
    at += 4;
    if (token == kBeginNode) {
      const char* name = reinterpret_cast<const char*>(base + at);
      depth++;
      if (depth == 2) {
        in_cpus = str_equal(name, "cpus");
        in_chosen = str_equal(name, "chosen");
      }
      if (depth == 3 && in_cpus && is_cpu_node(name)) facts.harts++;
      at += align4(str_length(name, total - at) + 1);
    } else if (token == kEndNode) {
      if (depth == 2) in_cpus = in_chosen = false;
      depth--;
    } else if (token == kProp) {
      const u32 len = be32(base + at);
      const char* name = reinterpret_cast<const char*>(strings + be32(base + at + 4));
      const u8* value = base + at + 8;
      if (depth == 2 && in_cpus && str_equal(name, "timebase-frequency"))
        facts.timebase_hz = len == 8 ? be64(value) : len == 4 ? be32(value) : 0;
      if (depth == 2 && in_chosen && str_equal(name, lockvisor::abi::kRiscvBootInfoProperty)) {
        facts.has_boot_info = true;
        facts.boot_info_valid = len == 8;
        if (len == 8) facts.boot_info = be64(value);
      }
      at += 8 + align4(len);
    } else if (token != kNop) {
      break;  // the end, or a token this reader does not know
    }
  }
  return facts;
}

}  // namespace guest::riscv
