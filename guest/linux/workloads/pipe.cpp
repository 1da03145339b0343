// pipe: workers in pairs bounce one byte through two pipes, like
// `perf bench sched pipe` with several pairs at once. Each hand-over is a
// sleep and a wake-up: the reader sleeps on the pipe's wait queue, the
// writer wakes it (__wake_up_sync_key takes the wait queue's spinlock), and
// try_to_wake_up takes the sleeper's pi_lock and the runqueue lock of the
// CPU it is put on, which the scheduler on that CPU takes too. The pipe's
// own mutex is a sleeping lock; its optimistic spinning and its wait_lock
// (a spinlock) come in when both ends of a pipe are busy at once. So this
// is the workload of the scheduler's locks, and of a vCPU that goes idle
// and must be woken (halts, IPIs) for every byte.
//
// Worker 2k starts each round trip and counts round trips (its latency
// samples are round-trip times); worker 2k+1 echoes and counts bytes
// echoed. Whichever of the two sees the stop flag first closes its write
// end, and the other sees end of file; so does a worker that fails. No
// worker is left sleeping in read(2).
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "guest/linux/unique_fd.h"
#include "guest/linux/workloads/workloads.h"

namespace lockvisor::linux_init {
namespace {

struct Channel {
  UniqueFd read_end, write_end;
};

std::optional<std::string> make_channel(Channel& channel) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::string("pipe2: ") + std::strerror(errno);
  channel.read_end = UniqueFd(fds[0]);
  channel.write_end = UniqueFd(fds[1]);
  return std::nullopt;
}

// One byte, retried on EINTR. 1 = moved, 0 = end of file, -1 = error.
int move_byte(bool write, int fd) {
  char byte = 'x';
  for (;;) {
    const ssize_t n = write ? ::write(fd, &byte, 1) : ::read(fd, &byte, 1);
    if (n == 1) return 1;
    if (n == 0) return 0;
    if (errno != EINTR) return -1;
  }
}

class Pipe final : public Workload {
 public:
  unsigned workers(unsigned requested) const override { return requested < 2 ? 2 : requested & ~1u; }

  std::optional<std::string> prepare(unsigned workers, const Parameters&) override {
    pairs_ = std::vector<Pair>(workers / 2);
    for (Pair& pair : pairs_) {
      if (auto error = make_channel(pair.forth)) return error;
      if (auto error = make_channel(pair.back)) return error;
    }
    return std::nullopt;
  }

  void run(Worker& worker) override {
    Pair& pair = pairs_[worker.index() / 2];
    if (worker.index() % 2 == 0) {
      worker.loop([&] {
        if (move_byte(true, pair.forth.write_end.get()) != 1) return broken(worker, "write to the echoer", errno);
        const int got = move_byte(false, pair.back.read_end.get());
        if (got == 1) return true;
        // The echoer ends when it sees the stop flag first: not a failure.
        if (got == 0 && worker.stopping()) return false;
        return got == 0 ? broken(worker, "the echoer ended", 0) : broken(worker, "read from the echoer", errno);
      });
      pair.forth.write_end.reset();
    } else {
      // Untimed: an echo is mostly the wait for the starter's next byte.
      worker.loop(
          [&] {
            const int got = move_byte(false, pair.forth.read_end.get());
            if (got == 0) return false;  // the starter is done: the normal end
            if (got < 0) return broken(worker, "read from the starter", errno);
            if (move_byte(true, pair.back.write_end.get()) != 1) return broken(worker, "write to the starter", errno);
            return true;
          },
          false);
      pair.back.write_end.reset();
    }
  }

 private:
  struct Pair {
    Channel forth;  // starter -> echoer
    Channel back;   // echoer -> starter
  };

  static bool broken(Worker& worker, const char* what, int error) {
    worker.fail(std::string(what) + (error != 0 ? std::string(": ") + std::strerror(error) : std::string()));
    return false;
  }

  std::vector<Pair> pairs_;
};

}  // namespace

std::unique_ptr<Workload> make_pipe_workload() { return std::make_unique<Pipe>(); }

}  // namespace lockvisor::linux_init
