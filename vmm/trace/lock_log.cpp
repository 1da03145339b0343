#include "vmm/trace/lock_log.h"

#include <algorithm>
#include <cstring>

#include "lockvisor/abi/lock_trace.h"

namespace lockvisor::trace {
namespace abi = lockvisor::abi;
namespace {
constexpr std::uint64_t kPage = 4096;

template <class T>
T load(std::span<const std::byte> memory, std::uint64_t offset) {
  T value;
  std::memcpy(&value, memory.data() + offset, sizeof(T));
  return value;
}
}  // namespace

LockLogPlacement place_lock_log(std::uint64_t free_start, std::uint64_t free_end, unsigned vcpus,
                                std::size_t records_wanted) {
  LockLogPlacement place;
  if (vcpus == 0 || free_end <= free_start || records_wanted == 0) return place;
  const std::uint64_t budget = (free_end - free_start) / 2 / vcpus;  // bytes per vCPU
  const std::uint64_t per_record = sizeof(abi::LockTraceRecord);
  const std::uint64_t wanted = sizeof(abi::LockTraceHeader) + std::uint64_t{records_wanted} * per_record;
  // Whole pages: what was asked for, rounded up, unless the budget is smaller.
  const std::uint64_t stride = std::min((wanted + kPage - 1) / kPage * kPage, budget / kPage * kPage);
  if (stride < kPage) return place;
  place.stride = stride;
  // Never more than asked for: the lock lane holds two slices per record
  // wanted, not per record that rounding to pages made room for.
  place.capacity = std::min<std::uint64_t>((stride - sizeof(abi::LockTraceHeader)) / per_record, records_wanted);
  place.gpa = (free_end - stride * vcpus) / kPage * kPage;
  return place;
}

std::uint64_t lock_log_free_bytes_for(std::uint64_t records, unsigned vcpus) {
  // place_lock_log gives each vCPU half the free memory / vcpus, in pages.
  const std::uint64_t block = sizeof(abi::LockTraceHeader) + records * sizeof(abi::LockTraceRecord);
  return (block + kPage - 1) / kPage * kPage * vcpus * 2;
}

void init_lock_log(std::span<std::byte> memory, const LockLogPlacement& place, unsigned vcpus) {
  // Touched here, on the host, so that the host pages exist before the
  // guest's first write to each.
  std::memset(memory.data() + place.gpa, 0, place.stride * vcpus);
  for (unsigned i = 0; i < vcpus; ++i) {
    const abi::LockTraceHeader header{abi::kLockTraceMagic, place.capacity, 0, 0};
    std::memcpy(memory.data() + place.gpa + std::uint64_t{i} * place.stride, &header, sizeof header);
  }
}

LockLogStats read_lock_log(std::span<const std::byte> memory, const LockLogPlacement& place,
                           std::span<const GuestClock> clocks, std::uint64_t window_begin_ns,
                           std::uint64_t window_end_ns, std::uint64_t slack_ns, std::uint32_t max_lock,
                           Trace& trace) {
  LockLogStats stats;
  const auto vcpus = static_cast<unsigned>(clocks.size());
  if (place.stride == 0 || place.gpa + place.stride * vcpus > memory.size()) return stats;
  const auto begin = static_cast<std::int64_t>(window_begin_ns), end = static_cast<std::int64_t>(window_end_ns);
  const auto slack = static_cast<std::int64_t>(std::min<std::uint64_t>(slack_ns, std::uint64_t{1} << 62));
  const auto inside = [&](std::int64_t ns) { return ns >= begin - slack && ns <= end + slack; };
  const auto clamp = [&](std::int64_t ns) { return static_cast<std::uint64_t>(std::clamp(ns, begin, end)); };
  for (unsigned i = 0; i < vcpus; ++i) {
    const std::uint64_t base = place.gpa + std::uint64_t{i} * place.stride;
    const auto header = load<abi::LockTraceHeader>(memory, base);
    const std::uint64_t count = std::min(header.count, place.capacity);
    // A guest that claims more than its capacity wrote nothing we can trust
    // beyond it (one rejection for the header); its own "dropped" is a count
    // it may inflate, taken as such but bounded.
    if (header.count > place.capacity) ++stats.rejected;
    const std::uint64_t dropped = std::min<std::uint64_t>(header.dropped, std::uint64_t{1} << 48);
    stats.dropped += dropped;
    TraceBuffer& lane = trace.lock_lane(i);
    const GuestClock& clock = clocks[i];
    for (std::uint64_t r = 0; r < count; ++r) {
      const auto rec = load<abi::LockTraceRecord>(memory, base + sizeof(abi::LockTraceHeader) + r * sizeof(abi::LockTraceRecord));
      if (rec.lock >= max_lock || rec.arrive > rec.acquired || rec.acquired > rec.released) {
        ++stats.rejected;
        continue;
      }
      const std::int64_t t0 = clock.to_ns(rec.arrive), t1 = clock.to_ns(rec.acquired), t2 = clock.to_ns(rec.released);
      if (!inside(t0) || !inside(t2)) {
        ++stats.rejected;
        continue;
      }
      if (t0 < begin || t2 > end) ++stats.clamped;
      const std::uint64_t u0 = clamp(t0), u1 = clamp(t1), u2 = clamp(t2);
      std::uint8_t path = kInvalidPath;
      if (rec.path < locks::kAcqPathCount) {
        path = static_cast<std::uint8_t>(rec.path);
        ++stats.by_path[rec.path];
      } else {
        ++stats.invalid_path;
      }
      lane.add({u0, u1, 0, rec.lock, EventKind::kLockWait, path});
      lane.add({u1, u2, 0, rec.lock, EventKind::kLockHold, path});
      ++stats.records;
    }
    lane.add_dropped(2 * dropped);
  }
  return stats;
}

}  // namespace lockvisor::trace
