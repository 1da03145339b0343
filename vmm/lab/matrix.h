// The points of a scenario: the product of its axes, times the repeats.
//
// Order: repeats outermost, then the axes in the order the scenario gives
// them (the last varies fastest). A lab stopped half-way has therefore run
// the whole matrix a few times rather than some points five times, and drift
// in the machine hits every lock alike.
//
// A point's id is its key (axis=label for every axis, in axis order, joined
// by ',') plus "#r<repeat>": the same scenario always gives the same ids, so
// ids survive a restart (--resume), a shard split and a merge.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "vmm/lab/placement.h"
#include "vmm/lab/scenario.h"
#include "vmm/lab/settings.h"

namespace lockvisor::lab {

struct Point {
  std::size_t index = 0;  // position in the whole matrix
  std::string key;        // "lock=ticket,placement=2:1"
  unsigned repeat = 0;
  std::string id;         // key + "#r" + repeat
  std::vector<std::pair<std::string, std::string>> labels;  // axis -> label
  SettingValues settings;                                   // fixed, then each axis value's, words resolved
  std::vector<PlacementTerm> terms;                         // the placement words and what they became
};

struct Expansion {
  std::vector<Point> points;
  std::vector<LeftOutPoint> left_out;  // one per key, in matrix order
  std::vector<LeftOutPoint> vm_only;   // native twins only a VM can run (Scenario::vm_only), one per key
};

// The points, with sweeps expanded and placement words resolved for
// s.host_cpus (vmm/lab/placement.h), and those left out (LeftOutPoint):
// beyond a limit of the host, or a native twin only a VM can run.
// Throws a usage lockvisor::Error when every point is left out, or when the
// matrix has more than kMaxLabPoints points.
Expansion expand_matrix(const Scenario& s);
// The points alone.
std::vector<Point> expand(const Scenario& s);

// The most points (repeats included) a lab plans: far above every preset
// (the largest plans a few thousand on 256 CPUs), low enough that a
// matrix too big to run is refused at once instead of expanded for minutes
// (docs/lab.md states it).
inline constexpr std::uint64_t kMaxLabPoints = 100000;
// The points of the whole matrix, repeats included and left-out points
// counted, from the axis sizes (saturating): known before any point is made.
std::uint64_t matrix_size(const Scenario& s);

// "I/N" with 1 <= I <= N: shard I of N. Throws a usage Error otherwise.
struct Shard {
  unsigned index = 1;
  unsigned count = 1;
};
Shard parse_shard(const std::string& text);

// The points of shard I/N: every point whose matrix index % N == I - 1, so
// each shard gets a share of every lock and repeat.
std::vector<Point> shard_points(const std::vector<Point>& all, Shard shard);

// FNV-1a 64: a short stable name for files made per point and a seed.
std::uint64_t fnv1a(const std::string& text);

}  // namespace lockvisor::lab
