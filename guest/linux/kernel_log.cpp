#include "guest/linux/kernel_log.h"

#include <cerrno>
#include <string_view>

#include <fcntl.h>
#include <sys/klog.h>
#include <unistd.h>

#include "guest/linux/console_protocol.h"
#include "guest/linux/unique_fd.h"

namespace lockvisor::linux_init {
namespace {

void keep_if_spinlock(SpinlockLog& log, std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  const std::string message(text);
  if (log.lines.size() < kMaxSpinlockLines && is_spinlock_message(message)) log.lines.push_back(message);
}

// /dev/kmsg: one record per read(2), "prio,seq,time,flags;message\n"
// followed by optional " KEY=value" lines; EAGAIN after the last record,
// EPIPE when the record we were at has been overwritten (read on).
bool read_kmsg(SpinlockLog& log) {
  const UniqueFd fd(::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    log.error = errno;
    return false;
  }
  char record[8192];
  for (;;) {
    const ssize_t n = ::read(fd.get(), record, sizeof record);
    if (n < 0 && (errno == EINTR || errno == EPIPE)) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) {
      log.error = n < 0 ? errno : 0;
      return n == 0;
    }
    std::string_view text(record, static_cast<std::size_t>(n));
    const std::size_t header_end = text.find(';');
    if (header_end == std::string_view::npos) continue;
    text.remove_prefix(header_end + 1);
    keep_if_spinlock(log, text.substr(0, text.find('\n')));
  }
}

// klogctl(2) gives the buffer as text, "<prio>[    time] message" per line
// (the time only with printk.time).
bool read_klogctl(SpinlockLog& log) {
  const int size = ::klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, nullptr, 0);
  if (size <= 0) {
    log.error = size < 0 ? errno : 0;
    return false;
  }
  std::string buffer(static_cast<std::size_t>(size), '\0');
  const int n = ::klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buffer.data(), size);
  if (n < 0) {
    log.error = errno;
    return false;
  }
  std::string_view all(buffer.data(), static_cast<std::size_t>(n));
  while (!all.empty()) {
    const std::size_t end = all.find('\n');
    std::string_view line = all.substr(0, end);
    all.remove_prefix(end == std::string_view::npos ? all.size() : end + 1);
    if (line.starts_with('<')) {
      const std::size_t close = line.find('>');
      if (close != std::string_view::npos) line.remove_prefix(close + 1);
    }
    if (line.starts_with('[')) {
      const std::size_t close = line.find(']');
      if (close != std::string_view::npos) line.remove_prefix(close + 1);
      if (line.starts_with(' ')) line.remove_prefix(1);
    }
    keep_if_spinlock(log, line);
  }
  return true;
}

}  // namespace

bool is_spinlock_message(const std::string& text) {
  return text.find("PV spinlocks") != std::string::npos || text.find("PV qspinlock") != std::string::npos;
}

SpinlockLog read_spinlock_log() {
  SpinlockLog log;
  if (read_kmsg(log)) {
    log.source = "kmsg";
    log.error = 0;
    return log;
  }
  log.lines.clear();
  if (read_klogctl(log)) {
    log.source = "klogctl";
    log.error = 0;
    return log;
  }
  log.lines.clear();
  log.source = "none";
  return log;
}

}  // namespace lockvisor::linux_init
