# ctest trace.run_lines: what a traced run says of its file. A window where
# the run recorded nothing is written (metadata only) and the trace line says
# it is empty and where the run's events lie. Needs /dev/kvm (label "kvm").
include(${CMAKE_CURRENT_LIST_DIR}/run_or_skip.cmake)
file(MAKE_DIRECTORY ${OUT})
lockvisor_run_or_skip("lockvisor run --trace-window 10s:11s" --workload hello --vcpus 1 --trace ${OUT}/late.json
                      --trace-window 10s:11s)
if(NOT out MATCHES "trace: [^\n]*late.json [^\n]*window 10000.000..11000.000 ms: empty, the run's events lie in [0-9.]+..[0-9.]+ ms")
  message(FATAL_ERROR "the trace line does not say the window is empty:\n${out}")
endif()
