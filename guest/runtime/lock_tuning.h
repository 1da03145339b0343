// lock_tuning.h: the lock parameters a run sets with `--param key=value`
// (today: pvbounded's, locks/pvbounded_tuning.h), read from BootInfo args.
#pragma once

namespace guest {

// Every vCPU may call it (same arguments, same values); call before any lock
// is taken.  A value out of range is a guest fault with one clear line.
// `report`: also report the effective values (one exit each; call it on one
// vCPU only, and not in runs that count exits, e.g. `uncontended`), so they
// appear in the run's JSON.
void apply_lock_tuning(bool report);

}  // namespace guest
