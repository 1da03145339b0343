// Whether a result was made inside tools/nested-kvm: the outer host run.sh
// describes, believed only on a CPU that is QEMU's guest.
#include <gtest/gtest.h>

#include "vmm/host/emulation.h"

namespace lockvisor::host {
namespace {

constexpr const char* kMarker = "vendor=AuthenticAMD;family=26;model=2;stepping=1;kernel=6.18.44;cpus=2;kvm=none";

TEST(Emulation, TheMarkerNamesTheOuterHost) {
  const auto outer = parse_outer_host(kMarker);
  ASSERT_TRUE(outer.has_value());
  EXPECT_EQ(outer->vendor, "AuthenticAMD");
  EXPECT_EQ(outer->family, "26");
  EXPECT_EQ(outer->model, "2");
  EXPECT_EQ(outer->stepping, "1");
  EXPECT_EQ(outer->kernel, "6.18.44");
  EXPECT_EQ(outer->cpus, "2");
  EXPECT_EQ(outer->kvm, "none");
}

TEST(Emulation, AMalformedMarkerIsNoOuterHost) {
  for (const char* bad : {"", "vendor=AuthenticAMD", "vendor=;family=26;model=2;stepping=1;kernel=k;cpus=2;kvm=none",
                          "vendor=A;family=26;model=2;stepping=1;kernel=k;cpus=2;kvm=none;extra=1",
                          "vendor=A;vendor=B;model=2;stepping=1;kernel=k;cpus=2;kvm=none",
                          "vendor=A;family=26;model=2;stepping=1;kernel=k;cpus=2;kvm"})
    EXPECT_FALSE(parse_outer_host(bad).has_value()) << bad;
}

TEST(Emulation, EmulatedOnlyInsideQemuWithTheMarker) {
  const auto inside = emulation_from(kMarker, true, "QEMU");
  EXPECT_TRUE(inside.emulated);
  ASSERT_TRUE(inside.outer.has_value());
  EXPECT_EQ(inside.outer->family, "26");
  EXPECT_TRUE(inside.ignored.empty());

  const auto no_marker = emulation_from(nullptr, true, "QEMU");
  EXPECT_FALSE(no_marker.emulated);
  EXPECT_TRUE(no_marker.ignored.empty());
  // A marker that leaked into a real host's environment is not believed, and the JSON says why.
  const auto bare_metal = emulation_from(kMarker, false, "");
  EXPECT_FALSE(bare_metal.emulated);
  EXPECT_NE(bare_metal.ignored.find("no hypervisor flag"), std::string::npos) << bare_metal.ignored;
  const auto cloud = emulation_from(kMarker, true, "Amazon EC2");
  EXPECT_FALSE(cloud.emulated);
  EXPECT_NE(cloud.ignored.find("'Amazon EC2'"), std::string::npos) << cloud.ignored;
  EXPECT_FALSE(emulation_from("garbage", true, "QEMU").emulated);
}

TEST(Emulation, TheHostSectionAndTheWarning) {
  const auto j = emulation_json(emulation_from(kMarker, true, "QEMU"));
  EXPECT_EQ(j["emulated"], true);
  EXPECT_EQ(j["outer"]["cpu_family"], "26");
  EXPECT_EQ(j["outer"]["kvm"], "none");
  EXPECT_FALSE(j.contains("outer_ignored"));
  const auto warning = emulation_warning(j);
  EXPECT_EQ(warning.rfind("EMULATED (nested): ", 0), 0u) << warning;
  EXPECT_NE(warning.find("outer host AuthenticAMD family 26 model 2 stepping 1, Linux 6.18.44, 2 CPUs, KVM none"),
            std::string::npos)
      << warning;
  EXPECT_NE(warning.find("only ratios within this run mean anything"), std::string::npos) << warning;

  const auto real = emulation_json(emulation_from(kMarker, false, ""));
  EXPECT_EQ(real["emulated"], false);
  EXPECT_TRUE(real["outer"].is_null());
  EXPECT_TRUE(real["outer_ignored"].is_string());
  EXPECT_EQ(emulation_warning(real), "");
  EXPECT_EQ(emulation_warning(nlohmann::json::object()), "");
}

}  // namespace
}  // namespace lockvisor::host
