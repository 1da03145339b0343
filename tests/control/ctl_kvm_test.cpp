// `lockvisor ctl` drives a running VM: a 2-vCPU
// lockbench on host CPU 0 started with `run --api SOCK` answers stats; a paused vCPU's
// counters stop moving once it has taken the pause and move again after resume; an injected 20 ms
// preemption and a kick-mode switch show in the final JSON; bad requests,
// a client that vanishes mid-line and one that sends 1 MiB without a newline
// get error replies or are dropped, and the VM goes on until the test ends it
// (SIGINT: exit 130, the report still written); the socket is 0600 while it
// runs and gone after.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/kvm_required.h"
#include "tests/support/spawn_process.h"
#include "vmm/util/unique_fd.h"

namespace {

using nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("lockvisor-ctl-kvm-" + std::to_string(::getpid()) + "-" + name)).string();
}

struct Output {
  int exit_code = -1;
  std::string text;  // stdout and stderr
};

// Spawns LOCKVISOR_BINARY with `args`, its output into `out_path`.
pid_t spawn(const std::vector<std::string>& args, const std::string& out_path) {
  return lockvisor::test::spawn_process(LOCKVISOR_BINARY, args, out_path);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int wait_exit(pid_t pid) {
  int status = 0;
  if (pid <= 0 || ::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Output lockvisor(const std::vector<std::string>& args) {
  const std::string out = temp_path("ctl.out");
  Output o;
  o.exit_code = wait_exit(spawn(args, out));
  o.text = slurp(out);
  fs::remove(out);
  return o;
}

// `lockvisor ctl SOCK ... --json`, parsed.
json ctl_json(const std::string& sock, std::vector<std::string> args) {
  args.insert(args.begin(), {"ctl", sock});
  args.push_back("--json");
  const Output o = lockvisor(args);
  EXPECT_TRUE(o.exit_code == 0 || o.exit_code == 4) << o.text;
  const json reply = json::parse(o.text, nullptr, false);
  EXPECT_FALSE(reply.is_discarded()) << o.text;
  return reply;
}

json vcpu_stats(const std::string& sock, unsigned vcpu) {
  const json stats = ctl_json(sock, {"stats"});
  return stats.value("vcpus", json::array()).at(vcpu);
}

// vCPU `vcpu`'s stats once `done` holds for them, or the last ones read when
// it did not within `limit` (a wait for an observable state, not a sleep: a
// slow host only makes it longer).
template <typename Predicate>
json wait_for_vcpu(const std::string& sock, unsigned vcpu, Predicate done, std::chrono::seconds limit = 120s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  json v = vcpu_stats(sock, vcpu);
  while (!done(v) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
    v = vcpu_stats(sock, vcpu);
  }
  return v;
}

lockvisor::UniqueFd connect_to(const std::string& path) {
  lockvisor::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) return {};
  return fd;
}

// The VM under test; SIGKILLed if a test assertion leaves it running.
class RunningVm {
 public:
  RunningVm(const std::string& sock, const std::string& json_path, double seconds) : out_(temp_path("run.out")) {
    pid_ = spawn({"run", "--workload", "lockbench", "--lock", "pvqspinlock", "--vcpus", "2", "--pcpus", "0", "--duration",
                  std::to_string(seconds), "--api", sock, "--json", json_path},
                 out_);
  }
  ~RunningVm() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait_exit(pid_);
    }
    fs::remove(out_);
  }
  bool started() const { return pid_ > 0; }
  // Ends the run as a user's Ctrl-C does.
  void interrupt() const {
    if (pid_ > 0) ::kill(pid_, SIGINT);
  }
  int wait() { return wait_exit(std::exchange(pid_, -1)); }
  std::string output() const { return slurp(out_); }

 private:
  std::string out_;
  pid_t pid_ = -1;
};

TEST(CtlKvm, DrivesARunningVm) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  const std::string sock = temp_path("api.sock");
  const std::string json_path = temp_path("run.json");
  fs::remove(sock);
  fs::remove(json_path);
  // The guest's window (600 s) outlasts the test's own timeout: the run lasts
  // until the test ends it (SIGINT, below), so no check depends on how fast
  // this host starts the ctl processes. Both vCPUs share host CPU 0, so the
  // spinning guest leaves the other CPU to ctl and this test.
  RunningVm vm(sock, json_path, 600);
  ASSERT_TRUE(vm.started());
  for (int i = 0; i < 300 && !fs::exists(fs::symlink_status(sock)); ++i) std::this_thread::sleep_for(50ms);
  struct stat st {};
  ASSERT_EQ(::lstat(sock.c_str(), &st), 0) << "no socket: " << vm.output();
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);

  // stats: 2 vCPUs, live.
  const json stats = ctl_json(sock, {"stats"});
  if (stats.is_discarded() || !stats.value("ok", false)) {
    vm.interrupt();
    const int code = vm.wait();
    FAIL() << "no stats from the running VM (run exit code " << code << "):\n" << vm.output();
  }
  ASSERT_EQ(stats["vcpus"].size(), 2u) << stats;
  EXPECT_EQ(stats.value("outcome", std::string()), "running");
  const Output table = lockvisor({"ctl", sock, "stats"});
  EXPECT_EQ(table.exit_code, 0) << table.text;
  EXPECT_NE(table.text.find("vCPU"), std::string::npos) << table.text;

  // pause 1: once the vCPU has taken it (at its next exit, or when its halt
  // ends), its exits and CPU time stop moving.
  EXPECT_EQ(lockvisor({"ctl", sock, "pause", "1"}).exit_code, 0);
  const json paused_a = wait_for_vcpu(sock, 1, [](const json& v) { return v.value("parked", false); });
  EXPECT_EQ(paused_a.value("state", std::string()), "paused") << paused_a;
  ASSERT_TRUE(paused_a.value("parked", false)) << "the pause was never taken: " << paused_a;
  std::this_thread::sleep_for(500ms);
  const json paused_b = vcpu_stats(sock, 1);
  EXPECT_EQ(paused_b["exits_total"], paused_a["exits_total"]) << paused_a << paused_b;
  EXPECT_LT(paused_b.value("cpu_s", 0.0) - paused_a.value("cpu_s", 0.0), 0.02) << paused_a << paused_b;

  // resume 1: the pause ends (and is counted), the vCPU runs again and its
  // CPU time moves.
  EXPECT_EQ(lockvisor({"ctl", sock, "resume", "1"}).exit_code, 0);
  const double cpu_paused = paused_b.value("cpu_s", 0.0);
  const json resumed = wait_for_vcpu(sock, 1, [cpu_paused](const json& v) {
    return !v.value("parked", true) && v.value("cpu_s", 0.0) - cpu_paused > 0.005 &&
           v["injected_preemptions"].value("pauses", 0) == 1;
  });
  EXPECT_NE(resumed.value("state", std::string()), "paused") << resumed;
  EXPECT_FALSE(resumed.value("parked", true)) << resumed;
  EXPECT_GT(resumed.value("cpu_s", 0.0) - cpu_paused, 0.005) << paused_b << resumed;
  EXPECT_EQ(resumed["injected_preemptions"]["pauses"], 1) << resumed;

  // inject 20 ms while vCPU 1 runs, then pause it again and wait until it has
  // taken the pause (after the injected preemption, which it serves first).
  const auto inject_requested = std::chrono::steady_clock::now();
  EXPECT_EQ(lockvisor({"ctl", sock, "inject", "1", "20ms"}).exit_code, 0);
  EXPECT_EQ(lockvisor({"ctl", sock, "pause", "1"}).exit_code, 0);
  const json paused_again = wait_for_vcpu(sock, 1, [](const json& v) {
    return v.value("parked", false) && v["injected_preemptions"].value("count", 0) >= 1;
  });
  const auto injected_seen = std::chrono::steady_clock::now();
  EXPECT_TRUE(paused_again.value("parked", false)) << "the second pause was never taken: " << paused_again;

  // A kick-mode switch there and back.
  const json to_lossy = ctl_json(sock, {"kick-mode", "lossy"});
  const json to_sticky = ctl_json(sock, {"kick-mode", "sticky"});
  EXPECT_TRUE(to_lossy.value("ok", false) && to_lossy.value("changed", false)) << to_lossy;
  EXPECT_TRUE(to_sticky.value("ok", false)) << to_sticky;

  // Bad requests: error replies (exit 4), usage errors (exit 2); the VM goes on.
  const Output garbage = lockvisor({"ctl", sock, "raw", "{\"cmd\":"});
  EXPECT_EQ(garbage.exit_code, 4) << garbage.text;
  EXPECT_NE(garbage.text.find("not valid JSON"), std::string::npos) << garbage.text;
  const Output no_vcpu = lockvisor({"ctl", sock, "pause", "7"});
  EXPECT_EQ(no_vcpu.exit_code, 4) << no_vcpu.text;
  EXPECT_NE(no_vcpu.text.find("vCPU 7 does not exist"), std::string::npos) << no_vcpu.text;
  EXPECT_EQ(lockvisor({"ctl", sock, "inject", "1", "forever"}).exit_code, 2);
  {
    lockvisor::UniqueFd gone = connect_to(sock);
    ASSERT_TRUE(gone.valid());
    ASSERT_GT(::send(gone.get(), "{\"cmd\":\"pau", 12, MSG_NOSIGNAL), 0);
  }
  {
    lockvisor::UniqueFd flood = connect_to(sock);
    ASSERT_TRUE(flood.valid());
    const std::string mib(1 << 20, 'x');
    std::size_t sent = 0;
    while (sent < mib.size()) {
      const ssize_t n = ::send(flood.get(), mib.data() + sent, mib.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;  // closed by the server after its error line
      sent += static_cast<std::size_t>(n);
    }
    EXPECT_LT(sent, mib.size()) << "the server read 1 MiB without a newline and did not close";
  }
  EXPECT_TRUE(ctl_json(sock, {"stats"}).value("ok", false));
  EXPECT_EQ(lockvisor({"ctl", sock, "resume", "1"}).exit_code, 0);
  // A client still connected when the run ends reads EOF (and never keeps it alive).
  lockvisor::UniqueFd idle = connect_to(sock);
  ASSERT_TRUE(idle.valid());

  // The VM is still running, unharmed; the test ends the run as a user would.
  EXPECT_EQ(ctl_json(sock, {"stats"}).value("outcome", std::string()), "running");
  vm.interrupt();
  const int code = vm.wait();
  pollfd ready{idle.get(), POLLIN, 0};
  char byte = 0;
  EXPECT_EQ(::poll(&ready, 1, 5000), 1);
  EXPECT_EQ(::recv(idle.get(), &byte, 1, 0), 0) << "EOF for a client connected at the end";
  const std::string run_output = vm.output();
  EXPECT_EQ(code, 130) << run_output;
  EXPECT_FALSE(fs::exists(fs::symlink_status(sock))) << "the socket outlived the run";
  EXPECT_EQ(lockvisor({"ctl", sock, "stats"}).exit_code, 3);

  std::ifstream in(json_path);
  const json result = json::parse(in, nullptr, false);
  ASSERT_FALSE(result.is_discarded()) << run_output;
  EXPECT_EQ(result.value("outcome", std::string()), "interrupted") << result.value("reason", std::string());
  const json& injected = result["vcpus"][1]["injected_preemptions"];
  EXPECT_GE(injected.value("requested", std::uint64_t{0}), 1) << injected;
  EXPECT_GE(injected.value("count", std::uint64_t{0}), 1) << injected;
  // The 20 ms run from the request (vcpu_park.h): the vCPU sleeps what is
  // left once it is out of the guest (or back from a halt), so the park lies
  // inside what this test saw, from before the request to the park counted.
  EXPECT_GT(injected.value("ns", std::uint64_t{0}), 0) << injected;
  EXPECT_LE(injected.value("ns", std::uint64_t{0}),
            static_cast<std::uint64_t>(std::chrono::nanoseconds(injected_seen - inject_requested).count()))
      << injected;
  EXPECT_EQ(injected.value("pauses", std::uint64_t{0}), 2) << injected;
  EXPECT_GE(injected.value("paused_ns", std::uint64_t{0}), 500'000'000) << "held through a sleep of 500 ms: " << injected;
  const json& changes = result["settings"]["kick_mode_changes"];
  ASSERT_EQ(changes.size(), 2u) << result["settings"];
  EXPECT_EQ(changes[0]["from"], "sticky");
  EXPECT_EQ(changes[0]["to"], "lossy");
  EXPECT_EQ(changes[1]["to"], "sticky");
  EXPECT_EQ(result["settings"]["kick"], "sticky");
  fs::remove(json_path);
}

}  // namespace
