# ctest trace.swimlane_png: a traced lockbench through the CLI, then
# tools/trace-swimlane.py on it, whole and --around-worst-wait: both PNGs
# must exist and be non-empty PNG files. Needs /dev/kvm (label "kvm").
include(${CMAKE_CURRENT_LIST_DIR}/run_or_skip.cmake)
file(MAKE_DIRECTORY ${OUT})
lockvisor_run_or_skip("lockvisor run --trace" --workload lockbench --lock pvqspinlock --vcpus 4 --pcpus 0-1
                      --iterations 2000 --trace ${OUT}/lockbench.json)
foreach(mode whole worst)
  set(extra "")
  if(mode STREQUAL "worst")
    set(extra --around-worst-wait)
  endif()
  file(REMOVE ${OUT}/${mode}.png)
  execute_process(COMMAND ${PYTHON} ${SCRIPT} ${OUT}/lockbench.json -o ${OUT}/${mode}.png ${extra}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "trace-swimlane.py ${extra} failed (${rc}):\n${out}\n${err}")
  endif()
  file(SIZE ${OUT}/${mode}.png size)
  file(READ ${OUT}/${mode}.png magic LIMIT 8 HEX)
  if(size LESS 2000 OR NOT magic STREQUAL "89504e470d0a1a0a")
    message(FATAL_ERROR "${OUT}/${mode}.png is not a PNG with content (${size} bytes, magic ${magic})")
  endif()
  message(STATUS "${mode}.png: ${size} bytes; ${out}")
endforeach()
