// lock_tuning.h: the lock parameters a run sets with `--param key=value`
// (locks/pvbounded_tuning.h: pvbounded's and the qspinlock family's), read
// from BootInfo args.
#pragma once

namespace guest {

// Every vCPU may call it (same arguments, same values); call before any lock
// is taken.  A value out of range is a guest fault with one clear line.
// `report_for` (a lock name, or nullptr): also report the effective values of
// the keys that lock reads (one exit each; call it on one vCPU only, and not
// in runs that count exits, e.g. `uncontended`), so they appear in the run's
// JSON.
void apply_lock_tuning(const char* report_for);

}  // namespace guest
