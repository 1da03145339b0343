#!/usr/bin/env bash
# The measurements that only a many-CPU host can make, as one prepared script per part. A lent host gives a
# session 15 minutes in all, its start (about a minute) included, and at most 10 per command, so each part
# has a budget (BUDGET_S, default 400 s for A and 380 s for B) and runs its steps most important first: a
# step gets at most what is left of the budget, and once less than 15 s is left the remaining steps are
# recorded as skipped instead of run. Both parts together fit one lent session.
#   A: lab --preset pvbounded-scale with 3 runs per point (pvbounded's goal per setting at 2, 8 and 16 CPUs,
#      with trace-check of its timelines at 8 on 2, 8 on 8, 64 on 8 and 64 on 16 in its report), then lab
#      --preset quick one point at a time against the default --jobs (lab compare: wall times and medians);
#   B: the NUMA locks at 16 vCPUs 1:1 on two nodes traced and judged against their stated bounds, 256 vCPUs
#      with the run-state page, `run --native --vnuma 2`, lab --preset scaling, a second one-at-a-time quick
#      lab against the first (what the host changes between two serial labs), then 1024 vCPUs (KVM's limit
#      refuses them with one line where it is lower) and memory and start-up per vCPU (bench --startup).
# Every result goes under OUT (default ./big-host-out), with host.txt naming the machine and steps.tsv
# each step's command, exit status (or "skipped") and wall time. A step that fails is recorded and the
# next one runs. B's second quick lab compares against A's first: run A first, with the same OUT.
#
# Usage, from the checkout's root:  tools/dev/big-host-check.sh A|B [--dry-run]
#   LOCKVISOR=PATH  the binary (default .bundle/lockvisor, else build/default/vmm/lockvisor)
#   OUT=DIR         where results go
#   BUDGET_S=N      this part's budget in seconds
set -uo pipefail

part=${1:-}
dry=${2:-}
if [[ "$part" != A && "$part" != B ]] || [[ -n "$dry" && "$dry" != --dry-run ]]; then
  echo "usage: tools/dev/big-host-check.sh A|B [--dry-run]" >&2
  exit 2
fi
bin=${LOCKVISOR:-}
if [[ -z "$bin" ]]; then
  bin=.bundle/lockvisor
  [[ -x "$bin" ]] || bin=build/default/vmm/lockvisor
fi
if [[ -z "$dry" && ! -x "$bin" ]]; then
  echo "big-host-check: no lockvisor at $bin (set LOCKVISOR or build it)" >&2
  exit 2
fi
# This part's budget in seconds (see the top).
budget=${BUDGET_S:-$([[ "$part" == A ]] && echo 400 || echo 380)}
if ! [[ "$budget" =~ ^[0-9]+$ ]] || ((budget < 1)); then
  echo "big-host-check: BUDGET_S=$budget: expected a whole number of seconds" >&2
  exit 2
fi
root=${OUT:-$PWD/big-host-out}
out=$root/$part
[[ -n "$dry" ]] || mkdir -p "$out"
cpus=$(nproc)

# One step: NAME, a time limit in seconds, then the command. Recorded in steps.tsv. The limit is cut to
# what is left of the part's budget; with less than min_step seconds left the step is skipped.
min_step=15
started=$(date +%s)
step() {
  local name=$1 limit=$2
  shift 2
  if [[ -n "$dry" ]]; then
    echo "$name (at most ${limit} s): $*"
    return 0
  fi
  local left=$((budget - ($(date +%s) - started)))
  if ((left < min_step)); then
    printf '%s\tskipped\t0\t%s\n' "$name" "$*" >>"$out/steps.tsv"
    echo "big-host-check: $name skipped (${left} s of the ${budget} s budget left)"
    return 0
  fi
  ((limit > left)) && limit=$left
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout --signal=INT --kill-after=20 "$limit" "$@" >"$out/$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  printf '%s\t%s\t%.1f\t%s\n' "$name" "$rc" "$(echo "$t1 - $t0" | bc)" "$*" >>"$out/steps.tsv"
  echo "big-host-check: $name exit $rc ($(tail -n 1 "$out/$name.log" | cut -c1-120))"
}

if [[ -z "$dry" ]]; then
  {
    echo "date: $(date -u +%FT%TZ)"
    echo "kernel: $(uname -r)"
    echo "cpus: $cpus ($(taskset -pc $$ | sed 's/.*: //'))"
    grep -m4 -E '^(vendor_id|cpu family|model|stepping)\s' /proc/cpuinfo | sed 's/\s*:\s*/: /'
    "$bin" --version
    "$bin" doctor
  } >"$out/host.txt" 2>&1
  printf 'step\texit\twall_s\tcommand\n' >"$out/steps.tsv"
fi

if [[ "$part" == A ]]; then
  # The report has, beside each timeline (8 on 2, 8 on 8, 64 on 8 and 64 on 16), what trace-check finds in it
  # (timelines/*.check.txt and .check.json): docs/pvbounded.md, "What the 16-CPU run must check". Three runs
  # per point, as the issue's 8- and 16-CPU table was measured.
  step pvbounded-scale 330 "$bin" lab --preset pvbounded-scale --repeats 3 --out "$out/pvbounded-scale"
  # quick one point at a time, then side by side (the default --jobs): `lab compare` puts each median of
  # the second beside the first's interval, with both wall times.
  step quick-serial 120 "$bin" lab --preset quick --jobs 1 --out "$out/quick-serial"
  step quick-jobs 60 "$bin" lab --preset quick --out "$out/quick-jobs"
  step quick-compare-jobs 30 "$bin" lab compare "$out/quick-serial" "$out/quick-jobs"
  exit 0
fi

# Part B.
# The NUMA locks pinned 1:1 on two nodes of 8 CPUs (the explicit --vnuma form
# names the host CPUs itself), each traced around its longest wait and judged
# by trace-check against the bound its header states. A dry run lists them
# whatever this host has.
if ((cpus >= 16)) || [[ -n "$dry" ]]; then
  for lock in cna pvcna hq pvhq qspinlock; do
    step "numa-16-$lock" 40 "$bin" run --workload lockbench --lock "$lock" --vcpus 16 \
      --vnuma 0-7@0-7,8-15@8-15 --duration 1 --json "$out/numa-16-$lock.json" \
      --trace "$out/numa-16-$lock.trace.json" --trace-window worst-wait
    step "numa-16-$lock-check" 60 "$bin" trace-check "$out/numa-16-$lock.trace.json" \
      --json "$out/numa-16-$lock.check.json"
  done
fi
step vcpus-256-runstate 60 "$bin" run --workload lockbench --lock pvqspinlock --vcpus 256 --pcpus all \
  --runstate on --duration 0.5 --json "$out/vcpus-256.json"
step native-vnuma-cna 30 "$bin" run --native --workload lockbench --lock cna --vcpus 1x --pcpus all \
  --vnuma 2 --duration 1 --json "$out/native-vnuma-cna.json"
# The scaling preset at this size (the contender sweep side by side, 1:1 to
# 8:1 on every CPU), with its verdicts in report.md.
step scaling 180 "$bin" lab --preset scaling --out "$out/scaling"
# A second one-at-a-time quick lab against A's: what the host changes
# between two serial labs, the yardstick for what side by side changes.
step quick-serial-again 120 "$bin" lab --preset quick --jobs 1 --out "$out/quick-serial-again"
step quick-compare-serial 30 "$bin" lab compare "$root/A/quick-serial" "$out/quick-serial-again"
step vcpus-1024-runstate 120 "$bin" run --workload lockbench --lock pvqspinlock --vcpus 1024 --pcpus all \
  --runstate on --duration 0.5 --json "$out/vcpus-1024.json"
step bench-startup 150 "$bin" bench --startup --json "$out/bench-startup.json"
