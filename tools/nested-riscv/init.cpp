// /init of the nested RISC-V machine: a static riscv64 program, since the
// machine has no riscv64 shell or busybox (Debian ships no riscv64 binaries).
// It mounts the host's files through 9p, runs one command in a chroot of the
// host's root, reports its exit status and powers the machine off.
//
// What run.sh packs next to it in the initramfs:
//   /run/workdir  the working directory's absolute path (no newline)
//   /run/argv     the command's arguments, each ended by a NUL byte
//   /run/env      the command's environment (NAME=VALUE), each ended by a NUL
// The machine's ports, as run.sh wires them:
//   ttyS0 (the UART, /dev/console)      kernel log and this program's messages
//   virtio-serial port "lockvisor.output"  the command's stdout and stderr
//   virtio-serial port "lockvisor.status"  "started" just before the command
//       runs, "alive" every kHeartbeatSeconds while it runs, then
//       "exit=<code>"; or "error=<message>" when this program fails
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest/linux/pid1.h"
#include "guest/linux/unique_fd.h"

namespace {

using lockvisor::linux_init::UniqueFd;

// run.sh's freeze detection waits far longer than this between two lines.
constexpr unsigned kHeartbeatSeconds = 5;
// 9p message size: large reads and writes of build trees in few round trips.
constexpr const char* kMsize = "262144";
// The virtio-serial ports and 9p shares appear while the kernel probes its
// devices, possibly after init starts: how long to wait for each.
constexpr int kDeviceWaitTenths = 100;

int g_status_fd = -1;

void report(const std::string& line) {
  if (g_status_fd < 0) return;
  const std::string text = line + "\n";
  // One write per line: the heartbeat's process writes to the same port.
  if (::write(g_status_fd, text.data(), text.size()) < 0)
    std::fprintf(stderr, "nested-riscv init: cannot write the status port: %s\n", std::strerror(errno));
}

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "nested-riscv init: error: %s\n", message.c_str());
  report("error=" + message);
  lockvisor::linux_init::power_off();
}

std::string errno_text() { return std::strerror(errno); }

std::string read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) die(std::string("cannot read ") + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Splits "a\0b\0" into {"a", "b"}.
std::vector<std::string> nul_separated(const std::string& text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\0', start);
    if (end == std::string::npos) break;
    items.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return items;
}

void sleep_tenth() { ::usleep(100'000); }

// The /dev node of the virtio-serial port QEMU named `name`, once the
// kernel has added it (the host announces ports after the device probes).
std::optional<std::string> find_port(const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/sys/class/virtio-ports", ec)) {
    std::ifstream in(entry.path() / "name");
    std::string port_name;
    if (in && std::getline(in, port_name) && port_name == name)
      return "/dev/" + entry.path().filename().string();
  }
  return std::nullopt;
}

UniqueFd open_port(const std::string& name) {
  for (int i = 0; i < kDeviceWaitTenths; ++i, sleep_tenth()) {
    if (const auto path = find_port(name)) {
      UniqueFd fd(::open(path->c_str(), O_WRONLY | O_CLOEXEC));
      if (fd) return fd;
    }
  }
  die("virtio-serial port '" + name + "' did not appear");
}

void make_dir(const std::string& path, mode_t mode = 0755) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) die("cannot create " + path + ": " + ec.message());
  ::chmod(path.c_str(), mode);
}

void mount_or_die(const char* source, const std::string& target, const char* type, unsigned long flags,
                  const std::string& data = {}) {
  if (::mount(source, target.c_str(), type, flags, data.empty() ? nullptr : data.c_str()) != 0)
    die(std::string("cannot mount ") + type + " on " + target + ": " + errno_text());
}

void mount_9p(const char* tag, const std::string& target, unsigned long flags, const char* cache) {
  const std::string data = std::string("trans=virtio,version=9p2000.L,msize=") + kMsize + ",cache=" + cache;
  for (int i = 0; i < kDeviceWaitTenths; ++i, sleep_tenth())
    if (::mount(tag, target.c_str(), "9p", flags, data.c_str()) == 0) return;
  die(std::string("cannot mount 9p share '") + tag + "' on " + target + ": " + errno_text());
}

// /tmp: the host's /tmp as the read-only lower layer of an overlay whose
// upper layer is a tmpfs (host files visible, writes discarded); a plain
// empty tmpfs if the overlay cannot be mounted.
void mount_tmp() {
  make_dir("/tmpfs");
  mount_or_die("tmpfs", "/tmpfs", "tmpfs", 0);
  make_dir("/tmpfs/upper", 01777);
  make_dir("/tmpfs/work");
  if (::mount("overlay", "/host/tmp", "overlay", 0, "lowerdir=/host/tmp,upperdir=/tmpfs/upper,workdir=/tmpfs/work") ==
      0)
    return;
  std::fprintf(stderr, "nested-riscv init: warning: overlay on /tmp failed (%s); /tmp is an empty tmpfs\n",
               errno_text().c_str());
  mount_or_die("tmpfs", "/host/tmp", "tmpfs", 0, "mode=1777");
}

// Mirrors tools/nested-kvm's layout: the host's root read-only at /host, the
// working directory read-write at its own path inside it, fresh /proc, /sys,
// /dev, and /tmp (above) and a tmpfs /dev/shm whose writes are discarded.
void mount_host(const std::string& workdir) {
  make_dir("/host");
  mount_9p("hostroot", "/host", MS_RDONLY, "loose");
  mount_tmp();
  const std::string shared = "/host" + workdir;
  if (::access(shared.c_str(), F_OK) != 0) make_dir(shared);
  mount_9p("workdir", shared, 0, "mmap");
  mount_or_die("proc", "/host/proc", "proc", 0);
  mount_or_die("sysfs", "/host/sys", "sysfs", 0);
  mount_or_die("devtmpfs", "/host/dev", "devtmpfs", 0);
  const std::string shm = "/host/dev/shm";
  if (::mkdir(shm.c_str(), 01777) != 0 && errno != EEXIST) die("cannot create " + shm + ": " + errno_text());
  mount_or_die("tmpfs", shm, "tmpfs", 0, "mode=1777");
}

// Child of init: writes the heartbeat until init kills it.
pid_t start_heartbeat() {
  const pid_t pid = ::fork();
  if (pid < 0) die("fork: " + errno_text());
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (;;) {
      ::sleep(kHeartbeatSeconds);
      report("alive");
    }
  }
  return pid;
}

// In the child: what a shell prints and exits with when it cannot run a
// command (127 not found, 126 found but not executable).
[[noreturn]] void exec_command(const std::vector<std::string>& args, const std::vector<std::string>& env,
                               const std::string& workdir, int output_fd) {
  const int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) ::dup2(null_fd, 0);
  ::dup2(output_fd, 1);
  ::dup2(output_fd, 2);
  if (::chroot("/host") != 0 || ::chdir(workdir.c_str()) != 0) {
    std::fprintf(stderr, "nested-riscv: cannot enter %s: %s\n", workdir.c_str(), std::strerror(errno));
    std::_Exit(125);
  }
  ::clearenv();
  for (const auto& variable : env) {
    const auto eq = variable.find('=');
    if (eq != std::string::npos) ::setenv(variable.substr(0, eq).c_str(), variable.c_str() + eq + 1, 1);
  }
  std::vector<char*> argv;
  for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  const int error = errno;
  std::fprintf(stderr, "nested-riscv: %s: %s\n", argv[0], std::strerror(error));
  std::_Exit(error == ENOENT ? 127 : 126);
}

}  // namespace

int main() {
  for (const auto& outcome : lockvisor::linux_init::mount_pseudo_file_systems())
    if (outcome.error != 0)
      std::fprintf(stderr, "nested-riscv init: cannot mount %s: %s\n", outcome.target.c_str(),
                   std::strerror(outcome.error));
  lockvisor::linux_init::ensure_console();

  UniqueFd status = open_port("lockvisor.status");
  g_status_fd = status.get();
  UniqueFd output = open_port("lockvisor.output");

  struct stat kvm {};
  if (::stat("/dev/kvm", &kvm) != 0 || !S_ISCHR(kvm.st_mode))
    die("no /dev/kvm (is the H extension missing from the emulated CPU?)");

  const std::string workdir = read_file("/run/workdir");
  const auto args = nul_separated(read_file("/run/argv"));
  const auto env = nul_separated(read_file("/run/env"));
  if (workdir.empty() || workdir[0] != '/') die("bad /run/workdir");
  if (args.empty()) die("empty /run/argv");
  mount_host(workdir);

  report("started");
  const pid_t heartbeat = start_heartbeat();
  const pid_t command = ::fork();
  if (command < 0) die("fork: " + errno_text());
  if (command == 0) exec_command(args, env, workdir, output.get());

  int wstatus = 0;
  while (::waitpid(command, &wstatus, 0) < 0)
    if (errno != EINTR) die("waitpid: " + errno_text());
  ::kill(heartbeat, SIGKILL);
  ::waitpid(heartbeat, nullptr, 0);
  // The shell's convention: 128 + the signal that ended the command.
  const int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  // Writes to a virtio-serial port return once QEMU has taken the bytes, so
  // the command's output is all out before the status says it ended.
  report("exit=" + std::to_string(code));
  lockvisor::linux_init::power_off();
}
