#include "vmm/arch/riscv64/fdt_writer.h"

#include <fmt/format.h>

#include <map>
#include <string_view>

#include "lockvisor/abi/riscv_boot.h"
#include "vmm/util/error.h"

namespace lockvisor::arch::riscv64 {

namespace {

// Devicetree specification v0.4, 5.2 and 5.4.
constexpr std::uint32_t kMagic = 0xd00dfeed;
constexpr std::uint32_t kVersion = 17;
constexpr std::uint32_t kLastCompatibleVersion = 16;
constexpr std::uint32_t kHeaderBytes = 40;
constexpr std::uint32_t kBeginNode = 1;
constexpr std::uint32_t kEndNode = 2;
constexpr std::uint32_t kProp = 3;
constexpr std::uint32_t kEnd = 9;

void put_be32(std::vector<std::byte>& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::byte>((v >> shift) & 0xFF));
}

void pad4(std::vector<std::byte>& out) {
  while (out.size() % 4 != 0) out.push_back(std::byte{0});
}

// The structure block and the strings block it names property names in.
class Builder {
 public:
  void begin(std::string_view name) {
    put_be32(struct_, kBeginNode);
    for (char c : name) struct_.push_back(static_cast<std::byte>(c));
    struct_.push_back(std::byte{0});
    pad4(struct_);
  }
  void end() { put_be32(struct_, kEndNode); }

  void prop(std::string_view name, const std::vector<std::byte>& value) {
    put_be32(struct_, kProp);
    put_be32(struct_, static_cast<std::uint32_t>(value.size()));
    put_be32(struct_, name_offset(name));
    struct_.insert(struct_.end(), value.begin(), value.end());
    pad4(struct_);
  }
  void prop_cells(std::string_view name, std::initializer_list<std::uint32_t> cells) {
    std::vector<std::byte> value;
    for (std::uint32_t c : cells) put_be32(value, c);
    prop(name, value);
  }
  void prop_u64(std::string_view name, std::uint64_t v) {
    prop_cells(name, {static_cast<std::uint32_t>(v >> 32), static_cast<std::uint32_t>(v)});
  }
  void prop_string(std::string_view name, std::string_view s) {
    std::vector<std::byte> value;
    for (char c : s) value.push_back(static_cast<std::byte>(c));
    value.push_back(std::byte{0});
    prop(name, value);
  }
  void prop_empty(std::string_view name) { prop(name, {}); }

  std::vector<std::byte> finish(std::uint32_t boot_cpuid) {
    put_be32(struct_, kEnd);
    // Header, then the memory reservation map (only its terminating empty
    // entry: the guest may use all of RAM outside its image as it likes),
    // the structure block and the strings.
    const std::uint32_t rsvmap_offset = kHeaderBytes;
    const std::uint32_t struct_offset = rsvmap_offset + 16;
    const auto struct_bytes = static_cast<std::uint32_t>(struct_.size());
    const std::uint32_t strings_offset = struct_offset + struct_bytes;
    const auto strings_bytes = static_cast<std::uint32_t>(strings_.size());
    std::vector<std::byte> out;
    for (std::uint32_t v : {kMagic, strings_offset + strings_bytes, struct_offset, strings_offset, rsvmap_offset,
                            kVersion, kLastCompatibleVersion, boot_cpuid, strings_bytes, struct_bytes}) {
      put_be32(out, v);
    }
    out.resize(out.size() + 16, std::byte{0});
    out.insert(out.end(), struct_.begin(), struct_.end());
    out.insert(out.end(), strings_.begin(), strings_.end());
    return out;
  }

 private:
  std::uint32_t name_offset(std::string_view name) {
    const auto [it, added] = offsets_.try_emplace(std::string(name), static_cast<std::uint32_t>(strings_.size()));
    if (added) {
      for (char c : name) strings_.push_back(static_cast<std::byte>(c));
      strings_.push_back(std::byte{0});
    }
    return it->second;
  }

  std::vector<std::byte> struct_;
  std::vector<std::byte> strings_;
  std::map<std::string, std::uint32_t, std::less<>> offsets_;
};

}  // namespace

std::vector<std::byte> build_fdt(const FdtMachine& machine) {
  if (machine.harts == 0) fail("device tree: a machine needs at least one hart");
  if (machine.ram_bytes == 0) fail("device tree: a machine needs RAM");

  Builder fdt;
  fdt.begin("");
  fdt.prop_cells("#address-cells", {2});
  fdt.prop_cells("#size-cells", {2});
  fdt.prop_string("compatible", "lockvisor,riscv-virt");
  fdt.prop_string("model", "lockvisor RISC-V KVM machine");

  fdt.begin("chosen");
  if (machine.boot_info_gpa != 0) fdt.prop_u64(abi::kRiscvBootInfoProperty, machine.boot_info_gpa);
  fdt.end();

  fdt.begin(fmt::format("memory@{:x}", machine.ram_base));
  fdt.prop_string("device_type", "memory");
  fdt.prop_cells("reg", {static_cast<std::uint32_t>(machine.ram_base >> 32), static_cast<std::uint32_t>(machine.ram_base),
                         static_cast<std::uint32_t>(machine.ram_bytes >> 32),
                         static_cast<std::uint32_t>(machine.ram_bytes)});
  fdt.end();

  fdt.begin("cpus");
  fdt.prop_cells("#address-cells", {1});
  fdt.prop_cells("#size-cells", {0});
  fdt.prop_cells("timebase-frequency", {machine.timebase_hz});
  for (std::uint32_t hart = 0; hart < machine.harts; ++hart) {
    fdt.begin(fmt::format("cpu@{:x}", hart));
    fdt.prop_string("device_type", "cpu");
    fdt.prop_cells("reg", {hart});
    fdt.prop_string("status", "okay");
    fdt.prop_string("compatible", "riscv");
    fdt.prop_string("riscv,isa", machine.isa);
    fdt.prop_string("mmu-type", "riscv,sv48");
    // Each hart's local interrupt controller: sip/sie, where the sticky
    // kick's external interrupt arrives (sbi_lockvisor.h).
    fdt.begin("interrupt-controller");
    fdt.prop_cells("#address-cells", {0});
    fdt.prop_cells("#interrupt-cells", {1});
    fdt.prop_empty("interrupt-controller");
    fdt.prop_string("compatible", "riscv,cpu-intc");
    fdt.end();
    fdt.end();
  }
  fdt.end();

  fdt.end();
  auto blob = fdt.finish(0);
  if (blob.size() > abi::kRiscvFdtMaxBytes) {
    fail("device tree: {} bytes for {} harts, more than the {} bytes below BootInfo", blob.size(), machine.harts,
         abi::kRiscvFdtMaxBytes);
  }
  return blob;
}

}  // namespace lockvisor::arch::riscv64
