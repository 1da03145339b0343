// The start gate of a multi-VM run: every VM is built in its own child
// process (the slow part: memory, image, vCPU threads), then waits here, so
// that all guests start running at the same moment.
//
// Protocol, over one AF_UNIX stream socketpair per child (the child's end is
// passed as `lockvisor run --start-gate-fd N`): the child writes one byte,
// 'R', when its VM is built; the parent, once every child is ready, writes
// 'G' and a start time to each: CLOCK_MONOTONIC ns, 8 bytes, native order,
// kStartLead from now. Each child reads it and sleeps until that time, so the
// guests start at one instant rather than in the order their processes get a
// CPU after the wake-up (measured on a loaded 2-CPU host: up to 25 ms apart
// without the lead, because the first guest's vCPUs already occupy the CPUs
// the second child needs to wake up on). End of file on either side means the
// other has gone: the child gives up (host error), the parent reports that VM
// as failed. Both sides wait with poll() in short slices, so a stop signal or
// a deadline ends every wait.
#pragma once
#include <chrono>
#include <cstdint>

#include "vmm/util/unique_fd.h"

namespace lockvisor::multivm {

inline constexpr char kReadyByte = 'R';
inline constexpr char kGoByte = 'G';

// From "go" to the start time: long enough for every child to wake up and
// read it on a busy host, short against any run.
inline constexpr std::chrono::milliseconds kStartLead{30};

// How long a built VM waits for the gate before it gives up: far longer than
// any sibling takes to build, and still a bound.
inline constexpr std::chrono::seconds kGateWait{120};

// What one child saw of the gate, both CLOCK_MONOTONIC ns. The gate's
// invariant, which a report lets anyone check: every sibling's `ready_ns` is
// before the common `start_ns`, and no guest entered before `start_ns`.
struct GateTimes {
  std::int64_t ready_ns = 0;  // when this child reported its VM built
  std::int64_t start_ns = 0;  // the common start time the parent sent
};

// Child side: reports "built" on `fd`, waits for the parent's go and then
// sleeps until the start time it carries. Throws a host lockvisor::Error when
// the parent goes away or kGateWait passes, and machine::Interrupted on
// SIGINT/SIGTERM/SIGHUP.
GateTimes wait_at_start_gate(int fd);

// CLOCK_MONOTONIC in ns: comparable across the processes of one host.
std::int64_t monotonic_ns();

// One socketpair: `parent` stays here, `child` is inherited by the child.
struct GateChannel {
  UniqueFd parent;
  UniqueFd child;
};
GateChannel make_gate_channel();

// Parent side: tells one child to start at `start_ns`; false if it has gone.
bool open_start_gate(int fd, std::int64_t start_ns);

}  // namespace lockvisor::multivm
