#!/usr/bin/env bash
# The main job: install what is missing, build, then on the local KVM run the
# hypercall conformance suite, an overcommitted ping-pong (8 vCPUs on one
# host CPU) with its per-vCPU statistics, and the quick lab: every lock at
# 1:1, 2:1 and 4:1, five runs each, leaving results/quick/report.md, the
# summaries and the plots (a few minutes; LOCKVISOR_LAB_OUT moves it). Run
# again, it resumes that lab; one this version cannot resume (begun with
# another version's quick preset) is kept aside, dated, and a new one begins.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tools/install-deps.sh
cmake --preset default >/dev/null
# Only what the main job runs: lockvisor (the guest image and the run-state
# BPF program are built as its dependencies; the lab's plots are drawn by
# tools/lab-plot.py from the source tree). tools/test.sh builds the rest.
cmake --build --preset default --target lockvisor
tools/with-kvm.sh sh -c '
  ./build/default/vmm/lockvisor conformance --pingpong-rounds "${LOCKVISOR_PINGPONG_ROUNDS:-100000}" &&
  ./build/default/vmm/lockvisor run --workload pingpong --vcpus 8 --pcpus 0 --rounds 20000 &&
  out="${LOCKVISOR_LAB_OUT:-results/quick}" && resume= &&
  if [ -e "$out/lab.json" ]; then
    if why=$(./build/default/vmm/lockvisor lab --preset quick --out "$out" --resume --dry-run 2>&1 >/dev/null); then
      resume=--resume
    else
      aside="$out.previous-$(date +%Y%m%d-%H%M%S)" && mv "$out" "$aside" &&
      echo "quickstart: $out cannot be resumed by this version ($why); kept as $aside, a new lab begins"
    fi
  fi &&
  ./build/default/vmm/lockvisor lab --preset quick --out "$out" $resume &&
  echo "quickstart: open $out/report.md and $out/throughput.png"'
