# ctest trace.run_lines: what a traced run says of its file. A window where
# the run recorded nothing is written (metadata only) and the trace line says
# it is empty and where the run's events lie; a trace that cannot be written
# (a file size limit stands in for a full disk) is one line that names
# --trace and its file once, exit 6. Needs /dev/kvm (label "kvm").
include(${CMAKE_CURRENT_LIST_DIR}/run_or_skip.cmake)
file(MAKE_DIRECTORY ${OUT})
lockvisor_run_or_skip("lockvisor run --trace-window 10s:11s" --workload hello --vcpus 1 --trace ${OUT}/late.json
                      --trace-window 10s:11s)
if(NOT out MATCHES "trace: [^\n]*late.json [^\n]*window 10000.000..11000.000 ms: empty, the run's events lie in [0-9.]+..[0-9.]+ ms")
  message(FATAL_ERROR "the trace line does not say the window is empty:\n${out}")
endif()
find_program(SH sh REQUIRED)
execute_process(COMMAND ${SH} -c "trap '' XFSZ; ulimit -f 1; exec \"$0\" run --workload hello --vcpus 1 --trace \"$1\""
                        ${LOCKVISOR} ${OUT}/full.json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCHALL "--trace" named "${err}")
list(LENGTH named times)
if(NOT rc EQUAL 6 OR NOT err MATCHES "lockvisor: --trace [^\n]*full.json: not written: write failed: " OR NOT times EQUAL 1)
  message(FATAL_ERROR "a trace that cannot be written: exit ${rc}, expected 6 and one line naming --trace once:\n${err}")
endif()
if(EXISTS ${OUT}/full.json)
  message(FATAL_ERROR "a trace that could not be written left ${OUT}/full.json")
endif()
