// The control socket's request parser and dispatcher, and ctl's request
// builder, without KVM: every error path gets a one-line error reply, the
// id is echoed, and a good request reaches the target with its arguments.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "vmm/control/control_client.h"
#include "vmm/control/control_protocol.h"
#include "vmm/pvlock/kvm_backend.h"
#include "vmm/pvlock/userspace_backend.h"

namespace lockvisor::control {
namespace {

using nlohmann::json;

// Records what the dispatcher asked for; refuses what a test tells it to.
class FakeTarget final : public ControlTarget {
 public:
  unsigned vcpu_count() const override { return 2; }
  json stats() const override { return {{"vcpus", json::array({{{"vcpu", 0}}, {{"vcpu", 1}}})}}; }
  json pause(unsigned vcpu) override {
    calls.push_back("pause " + std::to_string(vcpu));
    if (refuse) throw RequestError("cannot pause vCPU 1: the run is ending");
    return {{"vcpu", vcpu}};
  }
  json resume(unsigned vcpu) override {
    calls.push_back("resume " + std::to_string(vcpu));
    return {{"vcpu", vcpu}};
  }
  json inject(unsigned vcpu, std::chrono::microseconds length) override {
    calls.push_back("inject " + std::to_string(vcpu) + " " + std::to_string(length.count()));
    return {{"vcpu", vcpu}};
  }
  json set_kick_mode(pvlock::KickMode mode) override {
    calls.push_back(std::string("kick-mode ") + pvlock::kick_mode_name(mode));
    if (refuse) throw RequestError("the kvm backend cannot switch --kick");
    return {{"to", pvlock::kick_mode_name(mode)}};
  }
  std::vector<std::string> calls;
  bool refuse = false;
};

class Dispatcher : public ::testing::Test {
 protected:
  json handle(const std::string& line) { return dispatcher.handle(line); }
  // The error of a reply that must be an error, and nothing reached the target.
  std::string error_of(const std::string& line) {
    const json reply = handle(line);
    EXPECT_EQ(reply.value("ok", true), false) << line;
    const std::string error = reply.value("error", std::string());
    EXPECT_FALSE(error.empty()) << line;
    EXPECT_EQ(error.find('\n'), std::string::npos) << "one line: " << error;
    EXPECT_TRUE(target.calls.empty()) << line;
    return error;
  }
  FakeTarget target;
  ControlDispatcher dispatcher{target};
};

TEST_F(Dispatcher, GoodRequestsReachTheTargetWithTheirArguments) {
  EXPECT_TRUE(handle(R"({"cmd":"stats"})").value("ok", false));
  EXPECT_EQ(handle(R"({"cmd":"stats"})")["vcpus"].size(), 2u);
  EXPECT_TRUE(handle(R"({"cmd":"pause","vcpu":1})").value("ok", false));
  EXPECT_TRUE(handle(R"({"cmd":"resume","vcpu":0})").value("ok", false));
  EXPECT_TRUE(handle(R"({"cmd":"inject","vcpu":1,"us":20000})").value("ok", false));
  EXPECT_TRUE(handle(R"({"cmd":"kick-mode","mode":"lossy"})").value("ok", false));
  EXPECT_EQ(target.calls, (std::vector<std::string>{"pause 1", "resume 0", "inject 1 20000", "kick-mode lossy"}));
  const json help = handle(R"({"cmd":"help"})");
  EXPECT_TRUE(help.value("ok", false));
  EXPECT_EQ(help["commands"].size(), 6u);
}

TEST_F(Dispatcher, EchoesTheIdOnSuccessAndOnError) {
  EXPECT_EQ(handle(R"({"cmd":"stats","id":7})")["id"], 7);
  EXPECT_EQ(handle(R"({"cmd":"nope","id":"abc"})")["id"], "abc");
  EXPECT_EQ(handle(R"({"cmd":"pause","id":[1,2]})")["id"], json({1, 2}));
  EXPECT_FALSE(handle(R"({"cmd":"stats"})").contains("id"));
}

TEST_F(Dispatcher, MalformedRequests) {
  EXPECT_NE(error_of("{\"cmd\":").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("stats").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("\xff\xfe{}").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(R"({"cmd":"st\xffts"})").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("[1,2]").find("JSON object"), std::string::npos);
  EXPECT_NE(error_of("42").find("JSON object"), std::string::npos);
  EXPECT_NE(error_of("{}").find("missing field 'cmd'"), std::string::npos);
  EXPECT_NE(error_of(R"({"cmd":3})").find("'cmd' must be a string"), std::string::npos);
  EXPECT_NE(error_of(std::string(kMaxRequestBytes + 1, ' ')).find("longer than"), std::string::npos);
}

TEST_F(Dispatcher, UnknownCommandsAndFields) {
  const std::string unknown = error_of(R"({"cmd":"reboot"})");
  EXPECT_NE(unknown.find("unknown command 'reboot'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("kick-mode"), std::string::npos) << "lists the commands: " << unknown;
  EXPECT_NE(error_of(R"({"cmd":"pause","vpcu":1})").find("unknown field 'vpcu'"), std::string::npos);
  EXPECT_NE(error_of(R"({"cmd":"stats","vcpu":1})").find("unknown field 'vcpu'"), std::string::npos);
  // A long or multi-line command name is cut and escaped in the error.
  const std::string long_name = error_of(R"({"cmd":")" + std::string(500, 'x') + "\\n\"}");
  EXPECT_LT(long_name.size(), 200u);
}

TEST_F(Dispatcher, MissingAndBadArguments) {
  EXPECT_NE(error_of(R"({"cmd":"pause"})").find("missing field 'vcpu'"), std::string::npos);
  EXPECT_NE(error_of(R"({"cmd":"resume"})").find("missing field 'vcpu'"), std::string::npos);
  EXPECT_NE(error_of(R"({"cmd":"inject","vcpu":1})").find("missing field 'us'"), std::string::npos);
  EXPECT_NE(error_of(R"({"cmd":"kick-mode"})").find("missing field 'mode'"), std::string::npos);
  EXPECT_NE(error_of(R"({"cmd":"pause","vcpu":2})").find("vCPU 2 does not exist"), std::string::npos);
  EXPECT_NE(error_of(R"({"cmd":"pause","vcpu":-1})").find("non-negative integer"), std::string::npos);
  EXPECT_NE(error_of(R"({"cmd":"pause","vcpu":1.5})").find("non-negative integer"), std::string::npos);
  EXPECT_NE(error_of(R"({"cmd":"pause","vcpu":"1"})").find("non-negative integer"), std::string::npos);
  EXPECT_NE(error_of(R"({"cmd":"pause","vcpu":18446744073709551615})").find("does not exist"), std::string::npos);
  EXPECT_NE(error_of(R"({"cmd":"inject","vcpu":1,"us":0})").find("from 1 to 10000000"), std::string::npos);
  EXPECT_NE(error_of(R"({"cmd":"inject","vcpu":1,"us":10000001})").find("not 10000001"), std::string::npos);
  EXPECT_NE(error_of(R"({"cmd":"inject","vcpu":1,"us":"20ms"})").find("'us' must be"), std::string::npos);
  EXPECT_NE(error_of(R"({"cmd":"inject","vcpu":1,"us":-5})").find("'us' must be"), std::string::npos);
  EXPECT_NE(error_of(R"({"cmd":"kick-mode","mode":"eager"})").find("sticky or lossy, not 'eager'"), std::string::npos);
  EXPECT_NE(error_of(R"({"cmd":"kick-mode","mode":1})").find("sticky or lossy"), std::string::npos);
}

TEST_F(Dispatcher, TargetRefusalsBecomeErrorReplies) {
  target.refuse = true;
  const json paused = handle(R"({"cmd":"pause","vcpu":1,"id":1})");
  EXPECT_FALSE(paused.value("ok", true));
  EXPECT_EQ(paused.value("error", std::string()), "cannot pause vCPU 1: the run is ending");
  EXPECT_EQ(paused["id"], 1);
  const json kick = handle(R"({"cmd":"kick-mode","mode":"lossy"})");
  EXPECT_FALSE(kick.value("ok", true));
  EXPECT_NE(kick.value("error", std::string()).find("cannot switch"), std::string::npos);
}

// The backends' live --kick setter: the userspace backend switches (and
// kick() then follows the new mode: a kick to a running vCPU is dropped
// when lossy, latched when sticky); the kvm backend refuses lossy.
TEST(KickModeSetter, UserspaceSwitchesKvmRefuses) {
  pvlock::BackendOptions options;
  options.boost = pvlock::BoostMechanism::kOff;
  pvlock::UserspaceBackend userspace(2, options);
  EXPECT_EQ(userspace.kick_mode(), pvlock::KickMode::kSticky);
  EXPECT_EQ(userspace.set_kick_mode(pvlock::KickMode::kLossy), std::nullopt);
  EXPECT_EQ(userspace.kick_mode(), pvlock::KickMode::kLossy);
  EXPECT_EQ(userspace.kick(0, 1), pvlock::KickResult::kDropped);  // vCPU 1 is not halted
  EXPECT_EQ(userspace.set_kick_mode(pvlock::KickMode::kSticky), std::nullopt);
  EXPECT_EQ(userspace.kick(0, 1), pvlock::KickResult::kDelivered);
  userspace.stop();

  pvlock::KvmBackend kvm(2, pvlock::BackendOptions{});
  const auto refused = kvm.set_kick_mode(pvlock::KickMode::kLossy);
  ASSERT_TRUE(refused.has_value());
  EXPECT_NE(refused->find("cannot switch --kick"), std::string::npos);
  EXPECT_EQ(kvm.set_kick_mode(pvlock::KickMode::kSticky), std::nullopt);
  EXPECT_EQ(kvm.kick_mode(), pvlock::KickMode::kSticky);
}

TEST(ReplyLine, IsOneLineEvenWithInvalidUtf8) {
  const std::string line = reply_line({{"ok", false}, {"error", std::string("bad \xff byte\nand a newline")}});
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_TRUE(json::accept(line)) << line;
}

TEST(CtlRequest, BuildsEveryCommand) {
  EXPECT_EQ(json::parse(build_request("stats", {})), json({{"cmd", "stats"}}));
  EXPECT_EQ(json::parse(build_request("pause", {"1"})), json({{"cmd", "pause"}, {"vcpu", 1}}));
  EXPECT_EQ(json::parse(build_request("resume", {"0"})), json({{"cmd", "resume"}, {"vcpu", 0}}));
  EXPECT_EQ(json::parse(build_request("inject", {"1", "20ms"})), json({{"cmd", "inject"}, {"vcpu", 1}, {"us", 20000}}));
  EXPECT_EQ(json::parse(build_request("kick-mode", {"lossy"})), json({{"cmd", "kick-mode"}, {"mode", "lossy"}}));
  EXPECT_EQ(build_request("raw", {R"({"cmd":"stats"})"}), R"({"cmd":"stats"})");
}

TEST(CtlRequest, RefusesBadCommandLines) {
  const auto usage_error = [](const std::string& command, const std::vector<std::string>& args) {
    try {
      build_request(command, args);
    } catch (const CtlError& e) {
      return e.code() == CtlExit::kUsage;
    }
    return false;
  };
  EXPECT_TRUE(usage_error("reboot", {}));
  EXPECT_TRUE(usage_error("stats", {"1"}));
  EXPECT_TRUE(usage_error("pause", {}));
  EXPECT_TRUE(usage_error("pause", {"one"}));
  EXPECT_TRUE(usage_error("pause", {"-1"}));
  EXPECT_TRUE(usage_error("inject", {"1"}));
  EXPECT_TRUE(usage_error("inject", {"1", "20 parsecs"}));
  EXPECT_TRUE(usage_error("raw", {"{}\n{}"}));
  EXPECT_TRUE(usage_error("raw", {}));
}

TEST(CtlRequest, PreemptionLengths) {
  EXPECT_EQ(parse_preemption_us("20ms"), 20000u);
  EXPECT_EQ(parse_preemption_us("1.5ms"), 1500u);
  EXPECT_EQ(parse_preemption_us("500us"), 500u);
  EXPECT_EQ(parse_preemption_us("500"), 500u);
  EXPECT_EQ(parse_preemption_us("2s"), 2000000u);
  for (const char* bad : {"", "ms", "0", "0.1us", "11s", "1..2ms", "5min", "-3ms", "1e3"})
    EXPECT_THROW(parse_preemption_us(bad), CtlError) << bad;
}

}  // namespace
}  // namespace lockvisor::control
