# lockvisor_run_or_skip(WHAT ARGS...), for the trace tests that boot a VM
# (label "kvm"): runs `${LOCKVISOR} run ARGS...`, leaving rc, out and err in
# the caller. A run that fails ends the test (WHAT names it), except where no
# KVM device is usable outside CI: the test is skipped (a macro, so its
# return() ends the calling script).
macro(lockvisor_run_or_skip what)
  execute_process(COMMAND ${LOCKVISOR} run ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    if(err MATCHES "/dev/kvm" AND NOT "$ENV{CI}" STREQUAL "true")
      message(STATUS "skipped: no KVM here: ${err}")
      return()
    endif()
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
endmacro()
