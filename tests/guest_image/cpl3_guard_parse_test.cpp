// The CPL3 guard's pure parts on small objdump snippets: parsing, prefix
// handling, each rule, the doorbell port checks, symbol attribution.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpl3_guard.h"

namespace lockvisor::guest_image {
namespace {

std::string rule_of(std::string_view text, Region region = Region::kCpl3,
                    std::span<const abi::PortAccess> ports = abi::kCpl3PortAccesses) {
  const std::optional<Finding> f = check_instruction(text, region, ports);
  return f ? std::string(rule_name(f->rule)) : "ok";
}

std::string hex_byte(unsigned v) {
  constexpr char kDigits[] = "0123456789abcdef";
  return std::string("0x") + kDigits[(v >> 4) & 0xf] + kDigits[v & 0xf];
}

TEST(Cpl3GuardParse, DisassemblyKeepsInstructionsDropsHeadersCommentsAndSkippedZeros) {
  const std::vector<Instruction> insns = parse_disassembly(
      "\nlockvisor-guest.elf:     file format elf64-x86-64\n\n\n"
      "Disassembly of section .text:\n\n"
      "0000000000100000 <_start>:\n"
      "  100000:\tmov    %rdi,%r12\n"
      "  100047:\tlea    0x137(%rip),%rax        # 100185 <user_entry>\n"
      "\t...\n"
      "  100050:\tcs nopw 0x0(%rax,%rax,1)\n\n"
      "Disassembly of section .text.other:\n\n"
      "0000000000200000 <f>:\n"
      "  200000:\tret    ");  // no final newline
  ASSERT_EQ(insns.size(), 4u);
  EXPECT_EQ(insns[0].address, 0x100000u);
  EXPECT_EQ(insns[0].text, "mov %rdi,%r12");
  EXPECT_EQ(insns[0].section, ".text");
  EXPECT_EQ(insns[1].text, "lea 0x137(%rip),%rax");
  EXPECT_EQ(insns[2].address, 0x100050u);
  EXPECT_EQ(insns[2].text, "cs nopw 0x0(%rax,%rax,1)");
  EXPECT_EQ(insns[3].text, "ret");
  EXPECT_EQ(insns[3].section, ".text.other");
}

TEST(Cpl3GuardParse, SymbolTableReadsFunctionsLabelsAndHiddenNamesSkipsFilesAndSections) {
  const std::vector<Symbol> syms = parse_symbol_table(
      "\nimage.elf:     file format elf64-x86-64\n\nSYMBOL TABLE:\n"
      "0000000000000000 l    df *ABS*\t0000000000000000 entry.S.o\n"
      "0000000000100000 l    d  .text\t0000000000000000 .text\n"
      "0000000000100057 l       .text\t0000000000000000 set_gate\n"
      "0000000000100190 l     F .text\t000000000000011c _ZN5guest3fooEv\n"
      "0000000000100c90  w    F .text\t00000000000000a5 weak_fn\n"
      "0000000000100200 g     F .text\t0000000000000010 .hidden hidden_fn\n");
  ASSERT_EQ(syms.size(), 4u);
  EXPECT_EQ(syms[0].name, "set_gate");
  EXPECT_EQ(syms[0].address, 0x100057u);
  EXPECT_FALSE(syms[0].is_function);
  EXPECT_EQ(syms[1].name, "_ZN5guest3fooEv");
  EXPECT_EQ(syms[1].size, 0x11cu);
  EXPECT_EQ(syms[1].section, ".text");
  EXPECT_TRUE(syms[1].is_function);
  EXPECT_TRUE(syms[2].is_function);
  EXPECT_EQ(syms[3].name, "hidden_fn");
}

TEST(Cpl3GuardRules, OrdinaryCodeAndPrefixesPass) {
  for (const char* text : {"int3", "int $0x3", "rdtsc", "pause", "mov %rcx,%rdx", "lock cmpxchg %edx,(%rdi)",
                           "rep stos %rax,%es:(%rdi)", "cs nopw 0x0(%rax,%rax,1)",
                           "data16 cs nopw 0x0(%rax,%rax,1)", "notrack jmp *%rax", "xchg %ax,%ax",
                           "call 100095 <hlt>", "mov 0x10(%rip),%rax", "movups %xmm0,(%rdi)", "rep", "lock"})
    EXPECT_EQ(rule_of(text), "ok") << text;
}

TEST(Cpl3GuardRules, EachForbiddenInstructionAtCpl3) {
  // clang-format off
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"int $0x80", "int-n"}, {"int $0x4", "int-n"}, {"int1", "int-n"}, {"into", "int-n"},
      {"cpuid", "cpuid"},
      {"hlt", "hlt"},
      {"cli", "cli-sti"}, {"sti", "cli-sti"},
      {"vmcall", "vmcall"}, {"vmmcall", "vmcall"},
      {"vmlaunch", "vm-entry"}, {"vmresume", "vm-entry"}, {"vmrun", "vm-entry"},
      {"rdtscp", "rdtscp"},
      {"syscall", "syscall"}, {"sysenter", "syscall"},
      {"iretq", "privileged-return"}, {"iret", "privileged-return"}, {"sysretq", "privileged-return"},
      {"sysretl", "privileged-return"}, {"sysexitl", "privileged-return"},
      {"lgdt 0x0(%rip)", "system-register"}, {"lidt (%rax)", "system-register"},
      {"ltr %ax", "system-register"},
      {"mov %cr2,%rsi", "system-register"}, {"mov %rax,%cr3", "system-register"},
      {"mov %db7,%rax", "system-register"}, {"mov %rax,%dr6", "system-register"},
      {"rdmsr", "msr"}, {"wrmsr", "msr"},
      {"invlpg (%rax)", "invlpg"},
      {"swapgs", "swapgs"},
      {"ud2", "ud"}, {"ud1 %eax,%eax", "ud"},
      {"(bad)", "bad"},
      {"out %al,$0xe4", "port-io-outside-doorbell"}, {"in (%dx),%al", "port-io-outside-doorbell"},
      {"inl (%dx),%eax", "port-io-outside-doorbell"}, {"outsb %ds:(%rsi),(%dx)", "port-io-outside-doorbell"},
  };
  // clang-format on
  for (const auto& [text, rule] : cases) EXPECT_EQ(rule_of(text), rule) << text;
}

TEST(Cpl3GuardRules, PrefixesDoNotHideTheMnemonic) {
  EXPECT_EQ(rule_of("rep insb (%dx),%es:(%rdi)"), "port-io-outside-doorbell");
  EXPECT_EQ(rule_of("rep outsb %ds:(%rsi),(%dx)"), "port-io-outside-doorbell");
  EXPECT_EQ(rule_of("data16 out %ax,(%dx)"), "port-io-outside-doorbell");
  EXPECT_EQ(rule_of("cs (bad)"), "bad");
  EXPECT_EQ(rule_of("rex.W (bad)"), "bad");
  EXPECT_EQ(rule_of("{vex} cpuid"), "cpuid");
  EXPECT_EQ(rule_of("cs int $0x80"), "int-n");
  EXPECT_EQ(rule_of("cs int $0x3"), "ok");
  EXPECT_EQ(rule_of("rex.W int $0x80"), "int-n");
  EXPECT_EQ(rule_of("rex.B hlt"), "hlt");
  EXPECT_EQ(rule_of("lock cpuid"), "cpuid");
  EXPECT_EQ(rule_of("data16 cpuid"), "cpuid");
  EXPECT_EQ(rule_of("endbr64"), "ok");
  // 66 on a byte access changes nothing: still a byte-wide doorbell.
  EXPECT_EQ(rule_of("data16 out %al,$0xe4", Region::kDoorbell), "ok");
}

TEST(Cpl3GuardRules, Cpl0AndFaultRegionsAreExempt) {
  for (const Region r : {Region::kCpl0, Region::kFault})
    for (const char* text : {"hlt", "cpuid", "int $0x80", "(bad)", "out %eax,$0xe7", "iretq", "ud2"})
      EXPECT_EQ(rule_of(text, r), "ok") << text << " in " << region_name(r);
}

TEST(Cpl3GuardRules, DoorbellAllowsEveryAbiPortAtItsWidth) {
  int checked = 0;
  for (const abi::PortAccess& p : abi::kCpl3PortAccesses) {
    if (p.port > 0xff || p.width != 1) continue;  // imm8 form only; (%dx) below
    const std::string port = "$" + hex_byte(p.port);
    const std::string text = p.is_in ? "in " + port + ",%al" : "out %al," + port;
    EXPECT_EQ(rule_of(text, Region::kDoorbell), "ok") << text;
    ++checked;
  }
  EXPECT_GT(checked, 0);
  EXPECT_EQ(rule_of("outb %al,$0xe4", Region::kDoorbell), "ok");
  EXPECT_EQ(rule_of("out %al,(%dx)", Region::kDoorbell), "ok");
  EXPECT_EQ(rule_of("in (%dx),%al", Region::kDoorbell), "ok");
  EXPECT_EQ(rule_of("int3", Region::kDoorbell), "ok");
}

TEST(Cpl3GuardRules, DoorbellRejectsOtherPortsWidthsAndForms) {
  EXPECT_EQ(rule_of("out %al,$0x80", Region::kDoorbell), "port-not-in-abi");
  EXPECT_EQ(rule_of("out %al,$0xe7", Region::kDoorbell), "port-not-in-abi");  // kPortFault: CPL0 only
  EXPECT_EQ(rule_of("in $0xe4,%al", Region::kDoorbell), "port-not-in-abi");   // wrong direction
  EXPECT_EQ(rule_of("out %eax,$0xe4", Region::kDoorbell), "port-width");
  EXPECT_EQ(rule_of("outw %ax,$0xe4", Region::kDoorbell), "port-width");
  EXPECT_EQ(rule_of("out %ax,(%dx)", Region::kDoorbell), "port-width");
  EXPECT_EQ(rule_of("in (%dx),%eax", Region::kDoorbell), "port-width");
  EXPECT_EQ(rule_of("rep outsb %ds:(%rsi),(%dx)", Region::kDoorbell), "port-io-form");
  EXPECT_EQ(rule_of("insb (%dx),%es:(%rdi)", Region::kDoorbell), "port-io-form");
  // The rest of the rules hold in the doorbell region too.
  EXPECT_EQ(rule_of("cpuid", Region::kDoorbell), "cpuid");
  EXPECT_EQ(rule_of("int $0x80", Region::kDoorbell), "int-n");
  EXPECT_EQ(rule_of("(bad)", Region::kDoorbell), "bad");
}

TEST(Cpl3GuardRules, DoorbellPortsComeFromTheTableGiven) {
  const abi::PortAccess out_only[] = {{0x10, 1, false}};
  EXPECT_EQ(rule_of("out %al,$0x10", Region::kDoorbell, out_only), "ok");
  EXPECT_EQ(rule_of("out %al,$0xe4", Region::kDoorbell, out_only), "port-not-in-abi");
  EXPECT_EQ(rule_of("in (%dx),%al", Region::kDoorbell, out_only), "port-not-in-abi");
  const abi::PortAccess wide[] = {{0x10, 4, false}};
  EXPECT_EQ(rule_of("out %eax,$0x10", Region::kDoorbell, wide), "ok");
  EXPECT_EQ(rule_of("out %al,$0x10", Region::kDoorbell, wide), "port-width");
}

TEST(Cpl3GuardAttribute, PrefersCoveringFunctionThenNearestSymbolInSection) {
  const std::vector<Symbol> syms = {
      {0x1000, 0x20, "func_a", ".text", true},
      {0x1010, 0, "label_b", ".text", false},
      {0x1030, 0, "__fault_text_start", ".text", false},
      {0x1040, 0, "label_c", ".text", false},
      {0x1050, 0, "other_section", ".other", false},
      {0x1100, 0, "label_x", ".text", false},
      {0x1100, 0x10, "func_y", ".text", true},
  };
  auto at = [&](std::uint64_t a) {
    const Attribution w = attribute(syms, ".text", a);
    return w.symbol + "+" + std::to_string(w.offset);
  };
  EXPECT_EQ(at(0x1018), "func_a+24");   // the covering function beats the nearer label
  EXPECT_EQ(at(0x1035), "label_b+37");  // past func_a's end: nearest symbol; markers ignored
  EXPECT_EQ(at(0x1058), "label_c+24");  // symbols of other sections ignored
  EXPECT_EQ(at(0x1104), "func_y+4");    // same address: the function wins
  EXPECT_EQ(at(0x0fff), "+0");          // nothing at or below
  const std::vector<Symbol> markers_only = {{0x1000, 0, "__cpl0_text_start", ".text", false}};
  EXPECT_EQ(attribute(markers_only, ".text", 0x1004).symbol, "__cpl0_text_start");
}

// cpl0 [0x1000, 0x1010), doorbell [0x1010, 0x1020), fault [0x1020, +fault_bytes), then cpl3.
std::vector<Symbol> region_symbols(std::uint64_t fault_bytes) {
  const std::uint64_t cpl3 = 0x1020 + fault_bytes;
  return {
      {0x1000, 0, "__cpl0_text_start", ".text", false},
      {0x1000, 0, "_start", ".text", false},
      {0x1010, 0, "__cpl0_text_end", ".text", false},
      {0x1010, 0, "__doorbell_text_start", ".text", false},
      {0x1010, 8, "ring", ".text", true},
      {0x1020, 0, "__doorbell_text_end", ".text", false},
      {0x1020, 0, "__fault_text_start", ".text", false},
      {0x1020, 2, "fault_case", ".text", true},
      {cpl3, 0, "__fault_text_end", ".text", false},
      {cpl3, 16, "_ZN5guest3fooEv", ".text", true},
  };
}

TEST(Cpl3GuardRegions, FromMarkersEndsExclusive) {
  const Regions r = find_regions(region_symbols(0x10));
  EXPECT_EQ(r.classify(0x1000), Region::kCpl0);
  EXPECT_EQ(r.classify(0x100f), Region::kCpl0);
  EXPECT_EQ(r.classify(0x1010), Region::kDoorbell);
  EXPECT_EQ(r.classify(0x1020), Region::kFault);
  EXPECT_EQ(r.classify(0x1030), Region::kCpl3);
  EXPECT_EQ(r.classify(0x0fff), Region::kCpl3);
}

TEST(Cpl3GuardRegions, MissingOrMisorderedMarkersAreBadInput) {
  std::vector<Symbol> syms = region_symbols(0x10);
  std::erase_if(syms, [](const Symbol& s) { return s.name == "__doorbell_text_end"; });
  EXPECT_THROW(find_regions(syms), GuardError);
  syms = region_symbols(0x10);
  syms[0].address = 0x2000;  // __cpl0_text_start after everything
  EXPECT_THROW(find_regions(syms), GuardError);
}

TEST(Cpl3GuardCheck, AttributesViolationsCountsRegionsAndSkipsExemptCode) {
  const std::vector<Instruction> insns = {
      {0x1000, ".text", "hlt"},   {0x1001, ".text", "cpuid"},          // CPL0
      {0x1010, ".text", "out %al,$0xe4"}, {0x1012, ".text", "out %al,$0x80"},  // doorbell
      {0x1020, ".text", "ud2"},                                        // fault
      {0x1030, ".text", "push %rbp"},  {0x1031, ".text", "cpuid"},     // CPL3
  };
  const Report r = check(region_symbols(0x10), insns);
  ASSERT_EQ(r.violations.size(), 2u);
  EXPECT_EQ(r.violations[0].rule, Rule::kPortNotInAbi);
  EXPECT_EQ(r.violations[0].region, Region::kDoorbell);
  EXPECT_EQ(r.violations[0].symbol, "ring");
  EXPECT_EQ(r.violations[0].offset, 2u);
  EXPECT_EQ(r.violations[1].rule, Rule::kCpuid);
  EXPECT_EQ(r.violations[1].symbol, "_ZN5guest3fooEv");
  EXPECT_EQ(r.violations[1].offset, 1u);
  EXPECT_EQ(r.summary.instructions, (std::array<std::uint64_t, kRegionCount>{2, 2, 1, 2}));
  EXPECT_EQ(r.summary.bytes[static_cast<std::size_t>(Region::kFault)], 0x10u);
  EXPECT_EQ(r.summary.fault_symbols, std::vector<std::string>{"fault_case"});

  const std::string line = format_violation(r.violations[1]);
  EXPECT_NE(line.find("0x1031 cpl3 <guest::foo()+0x1> cpuid: cpuid -- "), std::string::npos) << line;
}

TEST(Cpl3GuardCheck, FaultRegionIsBounded) {
  EXPECT_TRUE(check(region_symbols(512), {}).clean());
  const Report r = check(region_symbols(513), {});
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_EQ(r.violations[0].rule, Rule::kFaultRegionTooLarge);
  EXPECT_EQ(r.violations[0].detail, "513 bytes > 512");
  EXPECT_TRUE(check(region_symbols(513), {}, Options{.max_fault_region_bytes = 1024}).clean());
}

}  // namespace
}  // namespace lockvisor::guest_image
