// The sysfs reader of KVM's PLE and halt-polling parameters, against fake
// /sys/module trees.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "vmm/host/kvm_module_params.h"

namespace lockvisor::host {
namespace {

class FakeSysModule : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("lockvisor-sysmodule-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void param(const char* module, const char* name, const char* text) {
    const auto dir = root_ / module / "parameters";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / name) << text;
  }
  std::filesystem::path root_;
};

TEST_F(FakeSysModule, IntelReadsPleGapAndWindow) {
  param("kvm_intel", "ple_gap", "128\n");
  param("kvm_intel", "ple_window", "4096\n");
  param("kvm_intel", "nested", "Y\n");
  const auto p = read_pause_exit_params(root_);
  EXPECT_EQ(p.module, "kvm_intel");
  ASSERT_EQ(p.values.size(), 2u);
  EXPECT_EQ(p.values.at("ple_gap"), 128);
  EXPECT_EQ(p.values.at("ple_window"), 4096);
}

TEST_F(FakeSysModule, AmdReadsPauseFilter) {
  param("kvm_amd", "pause_filter_count", "3000\n");
  param("kvm_amd", "pause_filter_thresh", "128\n");
  const auto p = read_pause_exit_params(root_);
  EXPECT_EQ(p.module, "kvm_amd");
  EXPECT_EQ(p.values.at("pause_filter_count"), 3000);
  EXPECT_EQ(p.values.at("pause_filter_thresh"), 128);
}

TEST_F(FakeSysModule, PvmHasNone) {
  param("kvm_pvm", "some_param", "1\n");
  param("kvm", "halt_poll_ns", "200000\n");
  const auto p = read_pause_exit_params(root_);
  EXPECT_EQ(p.module, "none");
  EXPECT_TRUE(p.values.empty());
  EXPECT_EQ(read_halt_poll_ns(root_), 200000);
}

TEST_F(FakeSysModule, UnreadableValuesAreAbsent) {
  param("kvm_amd", "pause_filter_count", "garbage\n");
  const auto p = read_pause_exit_params(root_);
  EXPECT_EQ(p.module, "kvm_amd");
  EXPECT_TRUE(p.values.empty());
  EXPECT_EQ(read_halt_poll_ns(root_), std::nullopt);  // no kvm module at all
}

}  // namespace
}  // namespace lockvisor::host
