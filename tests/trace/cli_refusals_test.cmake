# ctest trace.cli_refusals: --trace mistakes are usage errors (exit 2) with
# one line naming the option, found before any VM is built.
file(MAKE_DIRECTORY ${OUT}/a-directory)
function(expect_refused what)
  execute_process(COMMAND ${LOCKVISOR} run ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2)
    message(FATAL_ERROR "${what}: exit ${rc}, expected 2\n${out}\n${err}")
  endif()
  if(NOT err MATCHES "--trace")
    message(FATAL_ERROR "${what}: the error does not name --trace:\n${err}")
  endif()
  if(out MATCHES "outcome:")
    message(FATAL_ERROR "${what}: a VM ran:\n${out}")
  endif()
endfunction()
expect_refused("a directory as target" --workload hello --trace ${OUT}/a-directory)
expect_refused("a cap below 1000" --workload hello --trace ${OUT}/t.json --trace-max-events 10)
expect_refused("--native" --workload lockbench --native --iterations 10 --trace ${OUT}/t.json)
expect_refused("a window without --trace" --workload lockbench --iterations 10 --trace-window worst-wait)
expect_refused("a cap without --trace" --workload lockbench --iterations 10 --trace-max-events 5000)
expect_refused("an unknown window" --workload lockbench --iterations 10 --trace ${OUT}/t.json --trace-window worst)
expect_refused("a window without units" --workload lockbench --iterations 10 --trace ${OUT}/t.json --trace-window 1:2)
expect_refused("a window ending first" --workload lockbench --iterations 10 --trace ${OUT}/t.json --trace-window 5ms:2ms)
expect_refused("worst-wait without locks" --workload pingpong --trace ${OUT}/t.json --trace-window worst-wait)
if(EXISTS ${OUT}/t.json)
  message(FATAL_ERROR "a refused command left ${OUT}/t.json behind")
endif()

# trace-check: a file that is no trace is a usage error (exit 2, naming the
# file); a synthetic trace whose steal bypasses a running head older than T
# breaks the invariant (exit 1); the same with the head halted is explained
# by the host (exit 0).
function(expect_trace_check what expected file)
  execute_process(COMMAND ${LOCKVISOR} trace-check ${file} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL ${expected})
    message(FATAL_ERROR "trace-check ${what}: exit ${rc}, expected ${expected}\n${out}\n${err}")
  endif()
  if(expected EQUAL 2 AND NOT err MATCHES "${file}")
    message(FATAL_ERROR "trace-check ${what}: the error does not name the file:\n${err}")
  endif()
  if(NOT expected EQUAL 2 AND NOT out MATCHES "trace-check: pvbounded, T = [0-9]+ us")
    message(FATAL_ERROR "trace-check ${what}: no summary line:\n${out}")
  endif()
endfunction()
expect_trace_check("a missing file" 2 ${OUT}/missing.json)
expect_trace_check("a directory" 2 ${OUT}/a-directory)
file(WRITE ${OUT}/not-a-trace.json "{\"hello\": 1}")
expect_trace_check("a JSON file that is no trace" 2 ${OUT}/not-a-trace.json)
# vCPU 0 waits 1..6 ms as the (running) queue head; vCPU 1 steals at 3 ms.
set(lanes "{\"ph\":\"X\",\"pid\":1,\"tid\":0,\"name\":\"guest\",\"ts\":0,\"dur\":10000,\"args\":{}},
{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"name\":\"guest\",\"ts\":0,\"dur\":10000,\"args\":{}},
{\"ph\":\"X\",\"pid\":1,\"tid\":2000,\"name\":\"wait\",\"ts\":1000,\"dur\":5000,\"args\":{\"lock\":0,\"path\":\"reserved\"}},
{\"ph\":\"X\",\"pid\":1,\"tid\":2000,\"name\":\"hold\",\"ts\":6000,\"dur\":0.1,\"args\":{\"lock\":0,\"path\":\"reserved\"}},
{\"ph\":\"X\",\"pid\":1,\"tid\":2001,\"name\":\"wait\",\"ts\":3000,\"dur\":0,\"args\":{\"lock\":0,\"path\":\"steal\"}},
{\"ph\":\"X\",\"pid\":1,\"tid\":2001,\"name\":\"hold\",\"ts\":3000,\"dur\":0.1,\"args\":{\"lock\":0,\"path\":\"steal\"}}")
# A fixed T (1 ms): pvb_bound_max_us below T turns the adaptive bound off.
set(meta "\"metadata\":{\"vcpus\":2,\"args\":\"lock=pvbounded pvb_bound_max_us=1\",\"backend\":\"userspace\"}")
file(WRITE ${OUT}/violation.json "{\"traceEvents\":[${lanes}],${meta}}")
expect_trace_check("a steal past a running old head" 1 ${OUT}/violation.json)
# With the adaptive bound's default ceiling (16 ms) a 5 ms wait is within the guarantee.
file(WRITE ${OUT}/adaptive.json "{\"traceEvents\":[${lanes}],\"metadata\":{\"vcpus\":2,\"args\":\"lock=pvbounded\",\"backend\":\"userspace\"}}")
expect_trace_check("the same with the adaptive bound" 0 ${OUT}/adaptive.json)
expect_trace_check("the same with T = 3 ms" 0 ${OUT}/violation.json --bound-us 3000)
file(WRITE ${OUT}/halted.json "{\"traceEvents\":[${lanes},
{\"ph\":\"X\",\"pid\":1,\"tid\":0,\"name\":\"halted\",\"ts\":1100,\"dur\":4000,\"args\":{}}],${meta}}")
# Halted or not, a due head has the lock reserved for it (rule 3b): still a violation.
expect_trace_check("a steal past a halted head" 1 ${OUT}/halted.json)
# A file that cannot be a run's trace is refused, not passed: one line
# naming the file, where in it, and the value (clipped: a line, not the
# file echoed back).
function(expect_trace_refused what file mention)
  execute_process(COMMAND ${LOCKVISOR} trace-check ${file} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(LENGTH "${err}" length)
  string(REGEX MATCHALL "\n" newlines "${err}")
  list(LENGTH newlines lines)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "${file}" OR NOT err MATCHES "${mention}" OR NOT lines EQUAL 1
     OR length GREATER 300)
    message(FATAL_ERROR "trace-check ${what}: exit ${rc}, expected 2 and one line naming ${file} and '${mention}':\n"
                        "${out}\n${err}")
  endif()
endfunction()
string(REPLACE "\"reserved\"" "\"bogus\"" bogus "${lanes}")
file(WRITE ${OUT}/bogus.json "{\"traceEvents\":[${bogus}],${meta}}")
expect_trace_refused("an unknown path" ${OUT}/bogus.json "traceEvents\\[2\\]: args.path \"bogus\"")
file(WRITE ${OUT}/not-an-array.json "{\"traceEvents\":5,${meta}}")
expect_trace_refused("traceEvents that are no array" ${OUT}/not-an-array.json "traceEvents is 5, not an array")
file(WRITE ${OUT}/no-locks.json "{\"traceEvents\":[{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"thread_name\"}],${meta}}")
expect_trace_refused("a lock run without lock slices" ${OUT}/no-locks.json "nothing to judge")
string(REPLACE "\"ts\":3000" "\"ts\":-1e6" negative "${lanes}")
file(WRITE ${OUT}/negative.json "{\"traceEvents\":[${negative}],${meta}}")
expect_trace_refused("a slice before the origin" ${OUT}/negative.json "ts -1000000.0 is before the run's origin")
string(REPLACE "pvb_bound_max_us=1" "pvb_bound_us=abc" bad_param "${meta}")
file(WRITE ${OUT}/bad-param.json "{\"traceEvents\":[${lanes}],${bad_param}}")
expect_trace_refused("a parameter the run refuses" ${OUT}/bad-param.json "pvb_bound_us=abc is not a valid value")
file(WRITE ${OUT}/twice.json "{\"traceEvents\":[${lanes},${lanes}],${meta}}")
expect_trace_refused("every event twice" ${OUT}/twice.json "twice at once")
string(REPEAT "9" 5000 digits)
string(REPLACE "\"vcpus\":2" "\"vcpus\":${digits}" huge "${meta}")
file(WRITE ${OUT}/huge.json "{\"traceEvents\":[${lanes}],${huge}}")
expect_trace_refused("a 5000-digit number" ${OUT}/huge.json "number overflow parsing '9+…'")

# --json writes the summary and each lock's paths; a --json target that is a
# directory is refused before the trace is read (exit 2).
expect_trace_check("with --json" 0 ${OUT}/adaptive.json --json ${OUT}/check.json)
file(READ ${OUT}/check.json check)
string(JSON reserved GET "${check}" locks 0 paths reserved acquisitions)
string(JSON violations GET "${check}" bound violations)
if(NOT reserved EQUAL 1 OR NOT violations EQUAL 0)
  message(FATAL_ERROR "trace-check --json: reserved ${reserved}, violations ${violations}:\n${check}")
endif()
execute_process(COMMAND ${LOCKVISOR} trace-check ${OUT}/adaptive.json --json ${OUT}/a-directory RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "--json")
  message(FATAL_ERROR "trace-check --json DIRECTORY: exit ${rc}\n${out}\n${err}")
endif()
